// The one lifecycle helper behind every state machine of the project (STYLE
// point 7; Triton's InferenceRequest::SetState): the allowed moves in one
// table, one kind of error for an illegal move, and the state private to its
// owner. Model versions (engine), region leases and async jobs (gateway) use
// it; it lives here because both sides need the same one.

/** For each state, the states it may move to. */
export type TransitionTable<S extends string> = Readonly<Record<S, readonly S[]>>;

/** An illegal move: always an internal error (a bug), naming what moved "from X to Y". */
export class IllegalTransition extends Error {
  readonly code = 'INTERNAL' as const;
  constructor(
    readonly what: string,
    readonly from: string,
    readonly to: string,
  ) {
    super(`${what}: illegal transition from ${from} to ${to}`);
    this.name = 'IllegalTransition';
  }
}

/** `to` when the table allows from -> to, else throws IllegalTransition. */
export function checkTransition<S extends string>(table: TransitionTable<S>, what: string, from: S, to: S): S {
  if (!table[from].includes(to)) throw new IllegalTransition(what, from, to);
  return to;
}

/** A state owned by one object, changed only through `to()`. */
export class Lifecycle<S extends string> {
  #state: S;

  constructor(
    private readonly table: TransitionTable<S>,
    initial: S,
    /** Names the owner in errors, e.g. "model 'm' version 1". */
    private readonly what: string,
  ) {
    this.#state = initial;
  }

  get state(): S {
    return this.#state;
  }

  /** Whether the table allows moving to `to` now. */
  can(to: S): boolean {
    return this.table[this.#state].includes(to);
  }

  /** Move to `to`; throws IllegalTransition when the table does not allow it. */
  to(to: S): S {
    this.#state = checkTransition(this.table, this.what, this.#state, to);
    return this.#state;
  }
}
