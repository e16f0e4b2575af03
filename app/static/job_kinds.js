/* Which jobs concern which of the project page's panels, by job type. The panels hear of a job
   on the bus as "job" (the jobs table publishes each job it reads, and a bare { id, status,
   job_type: null } for one it will not read): a job whose type is unknown concerns them all. */

/** The statuses a job ends in (tasks.engine.status.TERMINAL): the one list the pages use. */
export const TERMINAL = new Set(["completed", "failed", "canceled"]);

/** The engine's own jobs (the canary, …) touch nothing shown beyond their own row. */
export const touchesProject = (type) => !type || !type.startsWith("system.");

/** A job of `type`, or of a type in `prefixes` ("plan." or an exact name). */
export const isKind = (type, ...prefixes) => !type || prefixes.some((p) => type === p || (p.endsWith(".") && type.startsWith(p)));
