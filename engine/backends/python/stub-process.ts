// One python stub process: spawned in its own process group with a private
// control channel on fd 3 (a socketpair Node creates for the extra 'pipe'),
// frames in and out through frame-codec.ts. The model's stdout/stderr become
// engine log lines tagged with the model and instance. Owns the child until
// kill(); single-threaded like any Node object.
import { LINES_PER_SECOND, pipeBoundedLines } from './stub-output-log.ts';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Readable, Duplex } from 'node:stream';
import { FrameDecoder, encodeFrame } from './frame-codec.ts';
import type { EngineFrame, StubFrame } from './stub-frames.ts';
import { log } from '../../../common/logger.ts';

/** stub.py, shipped next to this file together with triton_python_backend_utils.py. */
export const STUB_PATH = path.join(path.dirname(fileURLToPath(import.meta.url)), 'stub.py');

export interface StubSpawn {
  interpreter: string;
  modelFile: string;
  /** The instance's shm name prefix (objects the stub creates start with it). */
  prefix: string;
  /** For log lines: model and instance. */
  label: string;
}

/** How a stub went: it never started (spawn failed), or it ran and exited; `text` says how, in words. */
export interface StubExit {
  kind: 'spawn-failed' | 'exited';
  text: string;
}

/** A running stub; `exited` settles once the process is gone. */
export class StubProcess {
  readonly child: ChildProcess;
  readonly exited: Promise<StubExit>;
  private readonly channel: Duplex;
  private gone = false;

  constructor(opts: StubSpawn, onFrame: (m: StubFrame) => void) {
    this.child = spawn(opts.interpreter, ['-u', STUB_PATH, opts.modelFile, opts.prefix], {
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
      detached: true, // its own process group: kill() takes anything the model started with it
      env: { ...process.env, PYTHONUNBUFFERED: '1', PYTHONDONTWRITEBYTECODE: '1' },
    });
    this.channel = this.child.stdio[3] as Duplex;
    const decoder = new FrameDecoder();
    this.channel.on('data', (chunk: Buffer) => {
      let frames: unknown[];
      try {
        frames = decoder.push(chunk);
      } catch (err) {
        log.error(`python ${opts.label}: bad frame from stub; killing it`, err);
        this.kill();
        return;
      }
      // The stub is our own stub.py: its frames are taken as typed (an unknown kind is logged by the owner).
      for (const f of frames) onFrame(f as StubFrame);
    });
    this.channel.on('error', () => undefined); // the exit below reports it
    pipeLines(this.child.stdout!, opts.label);
    pipeLines(this.child.stderr!, opts.label);
    this.exited = new Promise((resolve) => {
      this.child.once('error', (err: NodeJS.ErrnoException) => {
        this.gone = true;
        const text =
          err.code === 'ENOENT'
            ? `python interpreter '${opts.interpreter}' not found`
            : `cannot start '${opts.interpreter}': ${err.message}`;
        resolve({ kind: 'spawn-failed', text });
      });
      this.child.once('exit', (code, signal) => {
        this.gone = true;
        resolve({ kind: 'exited', text: signal ? `killed by ${signal}` : `exited with code ${code}` });
      });
    });
  }

  get alive(): boolean {
    return !this.gone;
  }

  send(msg: EngineFrame): void {
    if (!this.gone) this.channel.write(encodeFrame(msg));
  }

  /** SIGKILL the stub's whole process group. */
  kill(): void {
    if (this.gone || this.child.pid === undefined) return;
    try {
      process.kill(-this.child.pid, 'SIGKILL');
    } catch {
      // no process group (already gone, or not a group leader): kill the stub itself
      this.child.kill('SIGKILL');
    }
  }
}

function pipeLines(stream: Readable, label: string): void {
  pipeBoundedLines(
    stream,
    (line) => emit(line, label),
    (lines, bytes) =>
      log.warn(
        `python ${label}: ${lines} lines (${bytes} characters) of model output dropped from the log (at most ${LINES_PER_SECOND} lines a second)`,
      ),
  );
}

function emit(line: string, label: string): void {
  // pb_utils.Logger tags its lines with a level letter.
  const m = /^([IWEV]) (.*)$/.exec(line);
  const text = `python ${label}: ${m ? m[2] : line}`;
  if (m?.[1] === 'E') log.error(text);
  else if (m?.[1] === 'W') log.warn(text);
  else log.info(text);
}
