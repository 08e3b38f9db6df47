// The rollout format (POST /admin/rollouts) and the record every gateway
// shares through the rollout store: which function, its next definition (a
// different target model, version or ensemble; same inputs and outputs), the
// steps of traffic share with their hold times, the gates that judge each
// step, an optional shadow target, and the history of each step's numbers and
// decision. Parsing is zod; the checks against the engine are in
// rollout-check.ts.
import { z } from 'zod';
import { TargetSchema } from '../calls/function-schema.ts';

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/** One step: the canary's share of calls (0-100 %) held for holdMs before the next step. */
export const StepSchema = z
  .object({
    share: z.number().min(0, 'share must be between 0 and 100').max(100, 'share must be between 0 and 100'),
    holdMs: z.number().int().min(0).default(60_000).describe('how long the step runs before it may be promoted'),
  })
  .strict();

/** What a step must show before promotion; a failure at any time rolls back. */
export const GatesSchema = z
  .object({
    minCalls: z.number().int().positive().describe('calls each side must have served in the step before the gates judge it'),
    maxErrorRate: z.number().min(0).max(1).default(0.01).describe('canary error rate (5xx and engine failures) above which it rolls back'),
    maxP95Ratio: z.number().positive().default(1.5).describe('canary p95 latency / stable p95 above which it rolls back'),
  })
  .strict();

export const ShadowSchema = z
  .object({
    target: TargetSchema,
    share: z.number().min(0, 'share must be between 0 and 100').max(100, 'share must be between 0 and 100').default(100),
  })
  .strict();

export const RolloutRequestSchema = z
  .object({
    function: z.string().regex(NAME),
    next: z.object({ target: TargetSchema }).strict().optional().describe("the function's next definition: its new target"),
    steps: z.array(StepSchema).min(1).max(20).optional(),
    gates: GatesSchema.optional(),
    shadow: ShadowSchema.optional(),
  })
  .strict()
  .superRefine((r, ctx) => {
    if (!r.next && !r.shadow)
      ctx.addIssue({ code: 'custom', path: ['next'], message: 'a rollout needs a next target (canary) or a shadow target' });
    if (r.next && !r.steps)
      ctx.addIssue({
        code: 'custom',
        path: ['steps'],
        message: 'a canary needs its steps (e.g. [{"share": 5}, {"share": 25}, {"share": 100}])',
      });
    if (r.next && !r.gates)
      ctx.addIssue({ code: 'custom', path: ['gates'], message: 'a canary needs gates with a minimum call count (gates.minCalls)' });
    if (r.steps && !r.next) ctx.addIssue({ code: 'custom', path: ['steps'], message: 'steps need a next target' });
    if (r.steps && r.steps[0]!.share >= 100)
      ctx.addIssue({
        code: 'custom',
        path: ['steps', 0, 'share'],
        message: 'the first step must leave calls on stable (share below 100): the gates compare the canary with them',
      });
    r.steps?.forEach((s, i) => {
      if (i > 0 && s.share < r.steps![i - 1]!.share)
        ctx.addIssue({ code: 'custom', path: ['steps', i, 'share'], message: 'shares must not decrease from step to step' });
    });
  });
export type RolloutRequest = z.infer<typeof RolloutRequestSchema>;

/** One side's numbers in one step. */
export interface SideNumbers {
  calls: number;
  errors: number;
  /** p95 latency in ms (0 with no calls). */
  p95Ms: number;
}

/** A step as the history shows it. */
export interface StepRecord {
  share: number;
  startedAt: number;
  endedAt?: number;
  stable: SideNumbers;
  canary: SideNumbers;
  decision?: 'promoted' | 'rolled_back' | 'completed' | 'aborted';
  reason?: string;
}

export type RolloutState = 'running' | 'promoted' | 'rolled_back' | 'aborted';

/** The shared record of one rollout (JSON in the store). */
export interface RolloutRecord {
  id: string;
  function: string;
  /** The bundle version the rollout started from. */
  baseVersion: string;
  spec: RolloutRequest;
  state: RolloutState;
  /** Index into spec.steps of the step running now (or the last one run). */
  step: number;
  createdAt: number;
  updatedAt: number;
  steps: StepRecord[];
  /** The bundle version that made the next definition stable (after promotion). */
  promotedVersion?: string;
  /** Shadow numbers since the start. */
  shadow?: { calls: number; errors: number; p95Ms: number; maxAbsDiff: number; mismatches: number };
}

/** The canary's share now (0 once the rollout is over). */
export function currentShare(r: RolloutRecord): number {
  if (r.state !== 'running' || !r.spec.steps) return 0;
  return r.spec.steps[r.step]?.share ?? 0;
}
