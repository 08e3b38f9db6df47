// One serialising lock for both processes: callers queue async critical
// sections and each starts only after the previous one settled, whether it
// resolved or threw. Replaces the hand-written `chain = chain.then(fn, fn)`
// promise chains (model entries, the memory budget, the function deployer).

export class SerialLock {
  /** Settles when the last queued section settles; never rejects. */
  #tail: Promise<unknown> = Promise.resolve();
  #queued = 0;

  /**
   * Run `fn` once every section queued before it has settled. Resolves or
   * rejects as `fn` does; a section that throws does not block the next one.
   */
  run<T>(fn: () => Promise<T> | T): Promise<T> {
    this.#queued++;
    const section = this.#tail.then(() => fn());
    this.#tail = section.then(this.#leave, this.#leave);
    return section;
  }

  /** Sections queued or running and not yet settled. */
  get pending(): number {
    return this.#queued;
  }

  readonly #leave = (): void => {
    this.#queued--;
  };
}
