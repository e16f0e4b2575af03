"""The coding agent: a repository and a task in, a verified branch and a pull request out.

One module per concern, pure logic apart from I/O:

- `payloads`   what clients send: `code.run_task` and `code.generate_mvp`
- `workspace`  a job's checkout under data_dir/workspaces/<job id>; every path a tool is
               given resolved inside it (traversal and symlinks out refused as ToolError)
- `sandbox`    `run_command`: a shell in the workspace under bubblewrap (`bwrap_fence`):
               the system read-only, its own /tmp and HOME, its own network and PID
               namespaces, never root, with time, memory and output caps (`fence`: the
               policy and the refusal; `unshare_fence`: the weaker opt-in fallback)
- `tools`      the tool contract (list_files, read_file, write_file, edit_file, search,
               run, finish): schemas for the model and `run_tool`, which never raises for
               a tool's own failure; `file_tools` the file ones, `lint` the check on edit
- `repomap`    the repo map within a character budget (`symbols`: tree-sitter definitions
               and references; `ranking`: PageRank over the files' references)
- `verify`     the checks a repository answers to, their output cut to size, and debug
               mode's error normalisation and similarity
- `plans`      subtasks as JSON validated against a schema
- `context_budget`  a conversation kept under a token budget, tool pairs intact
- `git`        clone, the patch of a workspace against its base, restore, commit and push
               (`gitcmd`: git run hardened; `gitsource`: which URLs and paths may be cloned)
- `github`     pull requests through the GitHub REST API (SWITCHYARD_GITHUB_API_URL);
               `webhooks` GitHub's deliveries mapped to tasks
- `loop`       the model ↔ tools loop, every model call and every tool call a step
- `prompts`    what the model is told in each phase
- `mvp`        `code.generate_mvp`; `demo` the repository `switchyard up` offers

`pipeline` puts them together in phases (start, explore and plan, build, verify,
deliver); `jobs` registers them as `code.run_task`, `code.generate_mvp` and
`code.run_task_until_merged` (`until_merged`).
"""
