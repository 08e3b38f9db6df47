// Triton's logging extension (GET/POST /v2/logging, the LogSettings RPC):
// log_file, log_info, log_warning, log_error, log_verbose_level, log_format,
// applied to the process's logger (common/logger.ts). log_file follows
// Triton: set at start (--log-file), refused over the network; ours takes a
// file under --log-dir too, and the log then goes there. An update is
// checked whole before any of it is applied.
import { currentLogFile, logVerbose, setLogFile, setLogLevels, setLogVerbose } from '../../common/logger.ts';
import { fileUnder, O_NOFOLLOW } from '../api/client-paths.ts';
import { invalidArg, unsupported } from '../api/status.ts';

export type LogSettingValue = boolean | number | string;

const BOOLS = { log_info: 'info', log_warning: 'warn', log_error: 'error' } as const;
const FORMATS = new Set(['default', 'ISO8601']);

export class LogSettings {
  private readonly levels = { log_info: true, log_warning: true, log_error: true };
  private format = 'default';
  private readonly startFile: string;

  constructor(private readonly opts: { logFile?: string; logDir?: string } = {}) {
    this.startFile = opts.logFile ?? '';
    if (opts.logFile) setLogFile(opts.logFile);
  }

  /** The current settings, after applying `update` (undefined values are left as they are). */
  update(update: Record<string, LogSettingValue | undefined> = {}): Record<string, LogSettingValue> {
    const apply: Array<() => void> = [];
    let file: LogSettingValue | undefined;
    for (const [k, v] of Object.entries(update)) {
      if (v === undefined) continue;
      if (k === 'log_file') file = v;
      else if (k in BOOLS) {
        if (typeof v !== 'boolean') throw invalidArg(`expect boolean for '${k}'`);
        const key = k as keyof typeof BOOLS;
        apply.push(() => {
          this.levels[key] = v;
          setLogLevels({ [BOOLS[key]]: v });
        });
      } else if (k === 'log_verbose_level') {
        if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 0xffffffff)
          throw invalidArg(`expect unsigned integer for '${k}'`);
        apply.push(() => setLogVerbose(v));
      } else if (k === 'log_format') {
        if (typeof v !== 'string' || !FORMATS.has(v)) throw invalidArg(`invalid argument for --log_format, got: ${String(v)}`);
        apply.push(() => {
          this.format = v;
        });
      } else throw invalidArg(`unknown log setting '${k}'`);
    }
    // The file last: it is opened here, and only once everything else passed its checks.
    if (file !== undefined) this.changeFile(file);
    for (const f of apply) f();
    return {
      log_file: currentLogFile(),
      ...this.levels,
      log_verbose_level: logVerbose(),
      log_format: this.format,
    };
  }

  /** Send the log to the client's log_file: '' is stderr, the start file is always allowed, others lie under --log-dir. */
  private changeFile(v: LogSettingValue): void {
    if (!this.opts.logDir) throw unsupported('log file location can not be updated through network protocol');
    if (typeof v !== 'string') throw invalidArg(`expect string for 'log_file'`);
    if (v === currentLogFile()) return;
    if (v === '' || v === this.startFile) return setLogFile(v || undefined);
    const file = fileUnder(this.opts.logDir, v, 'log_file', '--log-dir');
    try {
      setLogFile(file, O_NOFOLLOW);
    } catch (err) {
      throw invalidArg(`log_file '${v}' cannot be opened (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  }
}
