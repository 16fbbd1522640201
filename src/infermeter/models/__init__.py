"""Models: the built-in zoo, user model sources, input specifications and feed generation."""
