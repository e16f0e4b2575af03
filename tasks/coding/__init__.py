"""The coding agent: a repository and a task in, a verified branch and a pull request out.

One module per concern, pure logic apart from I/O:

- `workspace`  a job's checkout under data_dir/workspaces/<job id>; every path a tool is
               given resolved inside it (traversal and symlinks out refused as ToolError)
- `sandbox`    `run_command`: a shell in the workspace with time, memory and output caps,
               a scrubbed environment and no network unless the project allows it
- `tools`      the tool contract (list_files, read_file, write_file, edit_file, search,
               run, finish): schemas for the model and `run_tool`, which never raises for
               a tool's own failure (the model reads the error and tries again)
- `repomap`    tree-sitter definitions and references per file, files ranked by how much
               the rest of the repository refers to them, within a character budget
- `verify`     the test/build commands a repository answers to, their output cut to size,
               and debug mode's error normalisation and similarity
- `plans`      subtasks as JSON validated against a schema
- `git`        clone (token, or a local path under SWITCHYARD_LOCAL_REPOS), the patch of a
               workspace against its base, restore from base + patch, commit and push
- `github`     pull requests through the GitHub REST API (SWITCHYARD_GITHUB_API_URL)
- `loop`       the model ↔ tools loop, every model call and every tool call a step

The handlers (`tasks.handlers.code`) put them together as `code.run_task` and
`code.generate_mvp`.
"""
