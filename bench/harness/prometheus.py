"""The Prometheus text the dev server and the workers serve on `/metrics`, read: each sample,
a label of it, a metric's total over its series."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import httpx

__all__ = ["label", "samples", "scrape", "total"]


def samples(text: str) -> Iterator[tuple[str, str, float]]:
    """(name, labels, value) of each sample of a Prometheus text exposition."""
    for line in text.splitlines():
        if line and not line.startswith("#"):
            head, _, value = line.rpartition(" ")
            name, _, labels = head.partition("{")
            yield name, labels, float(value)


def label(labels: str, key: str) -> str:
    """The value of label `key` in a sample's labels ("" when it has none)."""
    if f'{key}="' not in labels:
        return ""
    return labels.split(f'{key}="', 1)[1].split('"', 1)[0]


def total(text: str, name: str) -> float:
    """The sum of every series of `name`."""
    return sum(value for found, _, value in samples(text) if found == name)


async def scrape(http: httpx.AsyncClient, url: str) -> str:
    """A `/metrics` page ("" when unreachable: a figure goes missing, the run goes on)."""
    with contextlib.suppress(httpx.HTTPError):
        return (await http.get(url)).text
    return ""
