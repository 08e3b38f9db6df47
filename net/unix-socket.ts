// A Unix socket's file, for the listeners that take a path (the gRPC port's
// `--grpc-unix-socket`, the local channel's `--local-socket`): a crashed
// process leaves its socket file behind, and listen() on that path fails
// until it is gone. Only a socket is ever removed: a path given by mistake
// that names some other file is left alone and reported.
import fs from 'node:fs';

/** Unlink the socket file at `p`, if there is one; what was there. */
export function removeStaleSocket(p: string): 'removed' | 'absent' | 'not-a-socket' {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(p);
  } catch {
    return 'absent'; // nothing to remove
  }
  if (!st.isSocket()) return 'not-a-socket';
  fs.unlinkSync(p);
  return 'removed';
}
