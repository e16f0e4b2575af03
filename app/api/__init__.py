"""The HTTP contract's shapes and reads: request schemas, response models, the
OpenAPI document, and the queries the routes answer from (no SQL lives in a route)."""
