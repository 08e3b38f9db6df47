// First-fit sub-allocation of one fixed-size region by offset, with
// coalescing of freed neighbours. Pure bookkeeping: it never touches memory.
//
// Ownership: one allocator per arena region; event loop only (no locking).

/** A block handed out by the allocator. */
export interface Block {
  offset: number;
  size: number;
}

export class SliceAllocator {
  /** Free blocks sorted by offset, never adjacent (always coalesced). */
  private free: Block[];
  private used = 0;
  private readonly live = new Map<number, number>();

  constructor(
    readonly capacity: number,
    readonly alignment = 64,
  ) {
    if (capacity <= 0 || !Number.isInteger(capacity)) throw new Error(`capacity must be a positive integer, got ${capacity}`);
    this.free = [{ offset: 0, size: capacity }];
  }

  /** Bytes currently handed out (after alignment). */
  get bytesInUse(): number {
    return this.used;
  }

  /** Number of blocks handed out. */
  get liveBlocks(): number {
    return this.live.size;
  }

  /** Size of the largest free block. */
  get largestFree(): number {
    return this.free.reduce((m, b) => Math.max(m, b.size), 0);
  }

  /** A block of at least `size` bytes (rounded up to the alignment), or null when none fits. */
  alloc(size: number): Block | null {
    if (size <= 0) size = 1;
    const need = Math.ceil(size / this.alignment) * this.alignment;
    const i = this.free.findIndex((b) => b.size >= need);
    if (i < 0) return null;
    const b = this.free[i]!;
    const block = { offset: b.offset, size: need };
    if (b.size === need) this.free.splice(i, 1);
    else this.free[i] = { offset: b.offset + need, size: b.size - need };
    this.live.set(block.offset, need);
    this.used += need;
    return block;
  }

  /** Return a block; freeing an unknown or already freed offset throws. */
  release(offset: number): void {
    const size = this.live.get(offset);
    if (size === undefined) throw new Error(`no live block at offset ${offset}`);
    this.live.delete(offset);
    this.used -= size;
    let i = this.free.findIndex((b) => b.offset > offset);
    if (i < 0) i = this.free.length;
    this.free.splice(i, 0, { offset, size });
    // Coalesce with the next, then with the previous block.
    const cur = this.free[i]!;
    const next = this.free[i + 1];
    if (next && cur.offset + cur.size === next.offset) {
      cur.size += next.size;
      this.free.splice(i + 1, 1);
    }
    const prev = this.free[i - 1];
    if (prev && prev.offset + prev.size === cur.offset) {
      prev.size += cur.size;
      this.free.splice(i, 1);
    }
  }
}
