/* The page's one event bus. A stream's events are published by their type ("status", "log",
   "artifact", …); the job page publishes the job it read as "job". A panel subscribes to the
   types it follows and hears nothing else. */

const subscribers = new Map(); // type -> Set of functions

/** Call `fn(event)` for each event of `type` published from now on; returns an unsubscribe. */
export function subscribe(type, fn) {
  if (!subscribers.has(type)) subscribers.set(type, new Set());
  subscribers.get(type).add(fn);
  return () => subscribers.get(type)?.delete(fn);
}

/** Hand `event` to its type's subscribers, in the order they subscribed; one that throws does
    not keep it from the others. */
export function publish(event) {
  for (const fn of [...(subscribers.get(event.type) || [])]) {
    try { fn(event); } catch (e) { console.error(e); }
  }
}
