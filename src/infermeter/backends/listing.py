"""What `infermeter backends` shows: every registered backend of every task, and every option they declare."""

from __future__ import annotations

from dataclasses import KW_ONLY, asdict, dataclass


@dataclass(frozen=True)
class BackendRow:
    """One registered backend as listed: availability here (with the reason and install hint when not), version,
    device, precisions (inference backends) and the keys of its options."""

    name: str
    task: str
    _: KW_ONLY  # the rest by keyword
    available: bool
    version: str | None
    device: str
    precisions: tuple[str, ...]
    description: str
    reason: str | None
    options: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        """As JSON (`infermeter backends --json`)."""
        data = asdict(self)
        data["precisions"] = list(self.precisions)
        data["options"] = list(self.options)
        return data


@dataclass(frozen=True)
class OptionRow:
    """One declared option and the backends that read it."""

    key: str
    kind: str
    accepts: str
    default: str | None
    help: str
    backends: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        """As JSON (`infermeter backends --options --json`)."""
        return {**asdict(self), "backends": list(self.backends)}


def backend_rows() -> list[BackendRow]:
    """Every registered backend, in registry order (inference first, then generation)."""
    from infermeter.backends.registry import backend_class, registered

    rows = []
    for entry in registered():
        cls = backend_class(entry.name)
        reason = cls.available()
        rows.append(
            BackendRow(
                name=entry.name,
                task=entry.task,
                available=reason is None,
                version=cls.version(),
                device=cls.device,
                precisions=tuple(getattr(cls, "precisions", ())),
                description=cls.description,
                reason=reason,
                options=tuple(option.key for option in cls.options),
            )
        )
    return rows


def option_rows() -> list[OptionRow]:
    """Every declared option, once per key (in the order backends declare them), with the backends reading it."""
    from infermeter.backends.options import option_catalog
    from infermeter.backends.registry import backend_class, registered

    readers: dict[str, list[str]] = {}
    for entry in registered():
        for option in backend_class(entry.name).options:
            readers.setdefault(option.key, []).append(entry.name)
    catalog = option_catalog()
    return [
        OptionRow(key, option.kind, option.accepts(), option.default_text(), option.help, tuple(readers[key]))
        for key, option in catalog.items()
    ]
