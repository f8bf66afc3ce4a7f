"""One adapter per job engine: each submits jobs through the engine's own interface and
reports the states the engine gives them."""
