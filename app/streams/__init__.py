"""Live events to browsers and clients: one hub per web process reading the event
feed, Server-Sent Events and WebSocket framing, replay from a cursor, stream slots."""
