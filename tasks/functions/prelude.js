// The JS side of the sandbox, evaluated once per child before any user code. It takes the
// two host callables off globalThis (only these closures keep them), installs the tools,
// routes time and randomness through the host (so a replay sees the recorded values), and
// evaluates to start(fn, inputJSON): run the user's compiled function, report once.
(function () {
  "use strict";
  const G = globalThis;
  const bridge = G.__sy_bridge;
  const done = G.__sy_done;
  delete G.__sy_bridge;
  delete G.__sy_done;
  delete G.__date_clock; // the quickjs wheel's real clock: time must come from the host
  delete G.performance; // QuickJS-ng's performance.now(): a clock no replay could repeat
  // User code may replace any of these; the prelude keeps its own copies.
  const parse = JSON.parse;
  const stringify = JSON.stringify;
  const RealDate = Date;
  const RealPromise = Promise;
  const then = Promise.prototype.then;
  const apply = Reflect.apply;
  const defineProperty = Object.defineProperty;
  const freeze = Object.freeze;
  const slice = String.prototype.slice;
  // QuickJS-ng keeps a concatenation as a rope, which its Python binding cannot hand over
  // ("could not convert args"): every string that crosses to the host is made flat first.
  function flat(s) { return typeof s === "string" ? apply(slice, s, [0]) : s; }

  function callSync(tool, args) {
    let text;
    try {
      text = stringify(args === undefined ? null : args);
    } catch (e) {
      throw new TypeError(`the arguments of ${tool} are not JSON: ${e && e.message}`);
    }
    if (typeof text !== "string") text = "null";
    const answer = bridge(flat(tool), flat(text));
    if (typeof answer !== "string") throw new Error("the tool bridge failed");
    if (answer[0] === "o") return parse(answer.slice(1));
    throw new Error(answer.slice(1));
  }
  // The host answers synchronously; the tools are awaitable like their real counterparts.
  function call(tool, args) {
    return new RealPromise((resolve) => resolve(callSync(tool, args)));
  }
  function defined(obj) {
    const out = {};
    for (const k of Object.keys(obj)) if (obj[k] !== undefined) out[k] = obj[k];
    return out;
  }

  // The supabase-js query builder, reduced to what one host call can answer. A table of
  // the function's own naming is a collection of flat rows (tasks/functions/collections.py).
  class Query {
    constructor(table) {
      this._q = { table, op: null, columns: null, filters: [], order: null, limit: null,
                  offset: null, values: null, count: null, on_conflict: null };
      this._one = null; // "single" | "maybe"
      this._sent = null;
    }
    _filter(op, column, value) {
      this._q.filters.push([op, column, value === undefined ? null : value]);
      return this;
    }
    select(columns, opts) {
      this._q.columns = columns === undefined ? "*" : columns;
      if (opts && opts.count) this._q.count = opts.count;
      return this;
    }
    eq(c, v) { return this._filter("eq", c, v); }
    neq(c, v) { return this._filter("neq", c, v); }
    gt(c, v) { return this._filter("gt", c, v); }
    gte(c, v) { return this._filter("gte", c, v); }
    lt(c, v) { return this._filter("lt", c, v); }
    lte(c, v) { return this._filter("lte", c, v); }
    in(c, v) { return this._filter("in", c, v); }
    like(c, v) { return this._filter("like", c, v); }
    ilike(c, v) { return this._filter("ilike", c, v); }
    is(c, v) { return this._filter("is", c, v); }
    contains(c, v) { return this._filter("contains", c, v); }
    or(filters) { return this._filter("or", null, filters); }
    order(column, opts) {
      const ascending = !(opts && opts.ascending === false);
      this._q.order = { column, ascending };
      return this;
    }
    limit(n) { this._q.limit = n; return this; }
    range(from, to) { this._q.offset = from; this._q.limit = to - from + 1; return this; }
    single() { this._one = "single"; return this; }
    maybeSingle() { this._one = "maybe"; return this; }
    insert(values) { this._q.op = "insert"; this._q.values = values; return this; }
    upsert(values, opts) {
      this._q.op = "upsert";
      this._q.values = values;
      if (opts && opts.onConflict) this._q.on_conflict = opts.onConflict;
      return this;
    }
    update(values) { this._q.op = "update"; this._q.values = values; return this; }
    delete() { this._q.op = "delete"; return this; }
    then(resolve, reject) {
      if (this._sent === null) {
        const q = this._q;
        const one = this._one;
        const sent = { ...q, op: q.op || "select" };
        for (const k of ["offset", "count", "on_conflict"]) if (sent[k] === null) delete sent[k];
        this._sent = apply(then, call("db", sent),
                           [(answer) => (one ? exactlyOne(answer, one) : answer)]);
      }
      return this._sent.then(resolve, reject);
    }
    catch(reject) { return this.then(undefined, reject); }
  }
  // .single() and .maybeSingle() as PostgREST answers them (PGRST116: not exactly one row).
  function exactlyOne(answer, one) {
    if (!answer || answer.error || !Array.isArray(answer.data)) return answer;
    const n = answer.data.length;
    if (n === 1) return { ...answer, data: answer.data[0] };
    if (n === 0 && one === "maybe") return { ...answer, data: null };
    return { data: null, count: answer.count, error: { code: "PGRST116",
      message: "JSON object requested, multiple (or no) rows returned",
      details: `The result contains ${n} rows`, hint: null } };
  }
  const db = freeze({ from: (table) => new Query(table) });
  // OpenAI's client, as code written for it calls it; the operator's provider answers.
  const openai = freeze({ chat: freeze({ completions: freeze({
    create: (request) => call("openai.chat", request === undefined ? null : request),
  }) }) });

  // console.* as log events (each a recorded call, like tools.log). An Error shows its
  // name and message (JSON.stringify makes "{}" of it). A run keeps its first CONSOLE_LINES
  // lines, then one note of how many more: logging in a loop, as models write it, must not
  // use up the run's tool calls and fail it (the count is the same on a replay).
  const CONSOLE_LINES = 100;
  let consoleLines = 0;
  function shown(v) {
    if (typeof v === "string") return v;
    if (v instanceof Error) return `${v.name}: ${v.message}`;
    try { const s = stringify(v); if (typeof s === "string") return s; } catch (_) { /**/ }
    return String(v);
  }
  function logAt(level) {
    return function (...args) {
      consoleLines += 1;
      if (consoleLines <= CONSOLE_LINES) {
        callSync("log", { message: args.map(shown).join(" "), data: null, level });
      }
    };
  }
  // Called once the run's code has returned or thrown: the lines it did not keep.
  function consoleDropped() {
    const more = consoleLines - CONSOLE_LINES;
    if (more > 0) {
      callSync("log", { message: `… ${more} more console lines not recorded (at most ` +
                                 `${CONSOLE_LINES} a run)`, data: null, level: "warn" });
    }
  }
  const console = freeze({ log: logAt("info"), info: logAt("info"), debug: logAt("debug"),
                           warn: logAt("warn"), error: logAt("error") });
  defineProperty(G, "console", { value: console, writable: true, configurable: true });

  const tools = freeze({
    supabase: db, // the Tasker name for the same client
    openai,
    llm: (prompt, opts) => call("llm", defined({
      prompt,
      system: opts && opts.system,
      max_tokens: opts && (opts.max_tokens !== undefined ? opts.max_tokens : opts.maxTokens),
    })),
    websearch: (query) => call("websearch", { query }),
    keystore: freeze({ get: (name) => call("keystore.get", { name }) }),
    log: (message, data) => call("log", { message, data: data === undefined ? null : data }),
    tasks: freeze({ run: (name, input) => call("tasks.run", {
      name, input: input === undefined ? null : input }) }),
    memory: freeze({
      get: (category, key) => call("memory.get", defined({ category, key })),
      set: (category, key, content) => call("memory.set", {
        category, key, content: content === undefined ? null : content }),
    }),
    db,
  });

  // Time and randomness are tool calls: the host records them for deterministic replay.
  function now() {
    const t = callSync("now", {});
    if (typeof t !== "number") throw new TypeError("the host's clock answered a non-number");
    return t;
  }
  function SyDate(...args) {
    if (new.target === undefined) return new RealDate(now()).toString();
    return args.length ? new RealDate(...args) : new RealDate(now());
  }
  SyDate.prototype = RealDate.prototype;
  SyDate.now = now;
  SyDate.parse = RealDate.parse;
  SyDate.UTC = RealDate.UTC;
  defineProperty(RealDate.prototype, "constructor", { value: SyDate, writable: true,
                                                       configurable: true });
  defineProperty(G, "Date", { value: SyDate, writable: true, configurable: true });
  Math.random = function random() {
    const r = callSync("random", {});
    if (typeof r !== "number") throw new TypeError("the host's random answered a non-number");
    return r;
  };

  function describe(e) {
    if (e instanceof Error || (e && typeof e === "object" && "message" in e && "name" in e)) {
      try { return [`${e.name}: ${e.message}`, String(e.stack || "")]; } catch (_) { /**/ }
    }
    let shown;
    try { shown = stringify(e); } catch (_) { shown = undefined; }
    if (shown === undefined) { try { shown = String(e); } catch (_) { shown = typeof e; } }
    return [`Uncaught (not an Error): ${shown}`, ""];
  }

  let reported = false;
  function report(kind, payload, stack) {
    if (reported) return;
    reported = true;
    try { consoleDropped(); } catch (_) { /* the run ends anyway: its outcome is what counts */ }
    done(flat(kind), flat(payload), flat(stack));
  }
  let outputLimit = Infinity;
  function returned(value) {
    // A big string is refused before JSON.stringify copies it (which could run out of memory).
    if (typeof value === "string" && value.length > outputLimit) {
      report("output_too_large", `the result is a string of ${value.length} characters, ` +
             `over the limit of ${outputLimit} bytes`, "");
      return;
    }
    let text;
    try {
      text = stringify(value);
    } catch (e) {
      report("error", `the result is not JSON: ${describe(e)[0]}`, "");
      return;
    }
    if (typeof text !== "string") {
      const what = value === undefined ? "undefined" : `a ${typeof value}`;
      report("error", `the result is not JSON: the function returned ${what} ` +
             "(return null for no value)", "");
      return;
    }
    report("returned", text, "");
  }

  return function start(fn, inputJSON, maxOutputBytes) {
    outputLimit = maxOutputBytes;
    let pending;
    try {
      pending = fn(parse(inputJSON), tools, db);
    } catch (e) {
      const [message, stack] = describe(e);
      report("error", message, stack);
      return;
    }
    apply(then, RealPromise.resolve(pending), [returned, (e) => {
      const [message, stack] = describe(e);
      report("error", message, stack);
    }]);
  };
})()
