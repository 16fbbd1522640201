"""The steps of `optimize`, one module each."""
