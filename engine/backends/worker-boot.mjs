// Worker threads do not inherit tsx's module hooks on Node 20: register them
// in the worker itself, then load the TypeScript entry module.
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
await import(workerData.__entry);
