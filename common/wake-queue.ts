// A queue read by one consumer that waits for items: push() and end() wake
// the reader parked in ready() / next(). Both processes' stream relays use it
// (the engine's generate_stream events, the gateway's streamed function
// responses); what is queued, bounded or counted stays with them.

export class WakeQueue<T> {
  readonly #items: T[] = [];
  #ended = false;
  #wake: (() => void) | undefined;

  get ended(): boolean {
    return this.#ended;
  }

  get length(): number {
    return this.#items.length;
  }

  /** Queue an item (ignored once ended) and wake the reader. */
  push(item: T): void {
    if (this.#ended) return;
    this.#items.push(item);
    this.#poke();
  }

  /** No more items: the reader gets what is queued, then undefined. */
  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#poke();
  }

  /** Drop what is queued (the reader then sees only the end, once end() is called). */
  clear(): void {
    this.#items.length = 0;
  }

  /** Resolves once something is queued or the queue has ended. */
  ready(): Promise<void> {
    if (this.#items.length || this.#ended) return Promise.resolve();
    return new Promise((r) => (this.#wake = r));
  }

  /** The item next() would give, without taking it. */
  peek(): T | undefined {
    return this.#items[0];
  }

  /** The next item; undefined once the queue has ended and everything was read. */
  async next(): Promise<T | undefined> {
    await this.ready();
    return this.#items.shift();
  }

  #poke(): void {
    const w = this.#wake;
    this.#wake = undefined;
    w?.();
  }
}
