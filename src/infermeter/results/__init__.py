"""Results: the versioned file schema, environment metadata, atomic file I/O and run history."""
