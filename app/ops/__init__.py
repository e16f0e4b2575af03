"""Running and operating Switchyard: the CLI, the launcher of `switchyard up` and its
embedded servers, `switchyard doctor`, migrations, the web server's settings, /metrics."""
