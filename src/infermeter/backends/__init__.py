"""Backends: one module and one class per inference framework (see DESIGN.md, "Backend contract")."""
