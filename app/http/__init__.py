"""The web app's HTTP plumbing: who is calling (tokens, sessions, auth, rate limits),
the database session and pool of a request, and the one map of errors to responses."""
