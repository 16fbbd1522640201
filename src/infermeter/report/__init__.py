"""Pure renderers: results in, text or bytes out. Nothing here prints, exits or imports a framework."""
