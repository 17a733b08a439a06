"""`known_at` (issue 25, transaction time): search and recall answered with what memsvc held at a
past time, versions included, from the event timeline and the item store; no copy of the data is
kept for it.

A key's version held at `known_at` is its latest add/update event stamped at or before it, unless
that version had expired by then (a delete or an expiry event being newer means nothing held;
`_live_then` for a TTL refreshed with no event). The answer is built from two parts that never
overlap:

- *Unchanged keys*: a current item whose version was written at or before `known_at`, live then
  (expired since but not swept yet counts), and whose key has no version event since. It is what
  was held then, so the normal search finds and ranks it (the indexes' scores), through an `Admit`
  check beside the filter's.
- *Changed keys*: the scope's version events stamped after `known_at` name every key written,
  deleted or expired since. For each, the version held then is read through the timeline's
  per-key index (`EventLog.history`, one entry) and decrypted as `MemoryHistory` does; those
  versions are filtered exactly as a search filters (the injected policy filter on the version's
  policy attributes, the caller's filter and `as_of` on its value) and scored by the search on
  the current items' scale (`Search._ranked_versions`: their texts embedded now, once per view,
  keyword BM25 over their texts, the same fusion and time boost): their index entries left when
  they stopped being current.

Bounded: at most MAX_KNOWN_AT_EVENTS version events since `known_at` are read per searched scope
(a namespace prefix, a recall layer), found in at most MAX_KNOWN_AT_ROWS timeline rows, and one
per-key read is made per changed key (or key met written since and not on the timeline yet, as
many again). A scope past any of these is a 400 that says so: never a silently partial answer.
`known_at` in the future, or older than the tenant's event retention (`tombstone_retention_days`:
the events that would say what changed since are gone), is a 400 too. A version held then whose own event is past retention
cannot be shown: the answer counts such keys (`past_retention`) instead of dropping them silently.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from memsvc.core.errors import InvalidArgument
from memsvc.core.filters import lookup_in
from memsvc.core.keywords import bm25, idf, term_counts
from memsvc.core.models import Caller, Memory, StoredItem, TimelineEvent
from memsvc.core.paths import MAX_INDEXED_FIELDS, extract_texts, worth_embedding
from memsvc.core.ranking import keyword_match
from memsvc.core.timeline import VERSION_KINDS, ScanTooWide
from memsvc.ports import Clock, EventLog, ItemStore
from memsvc.service.access import Access
from memsvc.service.sealing import Sealer

__all__ = ["KnownAt", "KnownAtView", "MAX_KNOWN_AT_EVENTS", "MAX_KNOWN_AT_ROWS", "MAX_VERSION_TEXTS",
           "KNOWN_AT_DESCRIPTION", "merge_ranked", "merge_newest_first", "keyword_scores", "texts_of",
           "embedded_texts_of"]

# Version events read per searched scope since `known_at`; one more is a 400. Each changed key
# costs one read of the per-key index (a DynamoDB Query and BatchGetItem), so this also bounds them.
MAX_KNOWN_AT_EVENTS = 200
# Timeline rows read per searched scope to find those events: the scan's partition or index range
# also holds other kinds' events and, for a one-segment prefix (the tenant-wide partition) or one
# deeper than two segments (its two-segment root's), other namespaces' events, skipped after being
# read. One more is a 400: another user's activity may make a scope too costly, never partial.
MAX_KNOWN_AT_ROWS = 1_000
# Texts embedded per version no longer current (its first string leaves worth a vector, as the
# indexer picks them from a value without `index_fields`), to give it a semantic score.
MAX_VERSION_TEXTS = 4
# How far back a version's key is walked to find its first write (`created_at`) when the key was
# deleted since: past that, the oldest version read stands in for it.
MAX_LINEAGE_EVENTS = 20
KNOWN_AT_DESCRIPTION = (
    "RFC 3339, transaction time: answer with the versions memsvc held then (each key's latest write at or before "
    "it, keys since updated or deleted included, nothing written after); not in the future, not older than the "
    f"tenant's event retention; at most {MAX_KNOWN_AT_EVENTS} changes since then under each searched scope, found "
    f"in at most {MAX_KNOWN_AT_ROWS} timeline events (a one-segment scope's are the tenant's) (400 otherwise)")
_MICROSECOND = timedelta(microseconds=1)

Admit = Callable[[Memory], bool]
Ref = tuple[tuple[str, ...], str]


class KnownAt:
    """Makes the `KnownAtView` of one searched scope."""

    def __init__(self, *, log_: EventLog, items: ItemStore, sealer: Sealer, access: Access, clock: Clock) -> None:
        self._log = log_
        self._items = items
        self._sealer = sealer
        self._access = access
        self._clock = clock

    def check(self, caller: Caller, known_at: datetime) -> None:
        """A 400 for a `known_at` that cannot be answered: in the future (what memsvc will hold is
        not known yet; a time is refused, never read as now), or before the tenant's event
        retention (what changed since is no longer on the timeline)."""
        now = self._clock.now()
        if known_at > now:
            raise InvalidArgument("known_at is in the future: memsvc can only say what it held up to now",
                                  details={"field": "known_at"})
        days = self._access.settings_of(caller).tombstone_retention_days
        if known_at < now - timedelta(days=days):
            raise InvalidArgument(
                f"known_at is older than the tenant's event retention ({days} days): what memsvc held then is no "
                "longer known", details={"field": "known_at", "retention_days": days})

    def view(self, caller: Caller, scope: tuple[str, ...], known_at: datetime) -> "KnownAtView":
        """The scope's changes since `known_at`, which the caller `check`ed: at most MAX_KNOWN_AT_EVENTS."""
        tenant = caller.tenant_id
        try:
            events = list(itertools.islice(
                self._log.scan(tenant, scope, kinds=VERSION_KINDS, after=known_at, page_size=MAX_KNOWN_AT_EVENTS + 1,
                               max_rows=MAX_KNOWN_AT_ROWS),
                MAX_KNOWN_AT_EVENTS + 1))
        except ScanTooWide:
            raise InvalidArgument(
                f"finding the changes under this namespace since known_at would read more than {MAX_KNOWN_AT_ROWS} "
                "timeline events: the timeline reads a namespace's changes with those of its first two segments (a "
                "one-segment namespace's with the whole tenant's), and that many changed since; ask about a later "
                "known_at, or search fewer namespaces (recall: fewer layers)",
                details={"field": "known_at", "max_rows": MAX_KNOWN_AT_ROWS}) from None
        if len(events) > MAX_KNOWN_AT_EVENTS:
            raise InvalidArgument(
                f"more than {MAX_KNOWN_AT_EVENTS} changes under this namespace since known_at: search a narrower "
                "namespace_prefix (or fewer layers), or a later known_at",
                details={"field": "known_at", "max_events": MAX_KNOWN_AT_EVENTS})
        changed: dict[Ref, list[TimelineEvent]] = {}
        for e in events:  # oldest first
            changed.setdefault((e.namespace, e.key), []).append(e)
        view = KnownAtView(self, tenant, known_at, changed)
        # Here, on the request's own thread: recall's layers then search side by side on a pool
        # that every request shares, and these reads must not hold it.
        view.read(list(changed))
        return view

    def read(self, tenant: str, refs: list[Ref], known_at: datetime, changed: dict[Ref, list[TimelineEvent]]
             ) -> tuple[list[tuple[TimelineEvent, datetime]], int]:
        """The version events held at `known_at` of these keys, each with its key's `created_at`,
        and how many keys held one whose event is past retention."""
        rows = self._items.get_many(tenant, refs) if refs else {}
        held, gone = [], 0
        for ref in refs:
            found = self.version_at(tenant, ref, known_at, changed.get(ref, []), rows.get(ref))
            if found is False:
                gone += 1
            elif found is not None:
                held.append(found)
        return held, gone

    def opened(self, e: TimelineEvent, created_at: datetime) -> Memory:
        """The version as a memory, its value and attributes decrypted (as `MemoryHistory` opens one)."""
        value, attributes = self._sealer.open_item(e)
        return Memory(id=e.memory_id, namespace=e.namespace, key=e.key, value=value or {}, attributes=attributes,
                      created_at=created_at, updated_at=e.changed_at, expires_at=e.expires_at, version=e.version,
                      current=False)

    # -- one key's version at known_at (used by the view) ----------------------------------

    def version_at(self, tenant: str, ref: Ref, known_at: datetime, since: list[TimelineEvent],
                   row: StoredItem | None) -> tuple[TimelineEvent, datetime] | None | bool:
        """The key's version event held at `known_at` and its key's `created_at`; None when it
        held none; False when one was held but its event is past retention (not shown, counted)."""
        namespace, key = ref
        if since and since[0].kind == "add":
            return None  # first written (again) since: nothing held then
        found = self._log.history(tenant, namespace, key, before=(known_at + _MICROSECOND, ""), limit=1)
        if not found:
            # Replaced, deleted or expired since, so something was held: its event is gone. (A row
            # not on the timeline yet, `since` empty, had a version before unless it is the first.)
            earlier = bool(since) or (row is not None and row.version > 1)
            return False if earlier else None
        e = found[0]
        if e.kind not in ("add", "update") or not _live_then(e, known_at, since, row):
            return None
        return e, self._created_at(tenant, e, since, row)

    def _created_at(self, tenant: str, e: TimelineEvent, since: list[TimelineEvent],
                    row: StoredItem | None) -> datetime:
        """When the version's key was first written: the add itself, the current row's (the same
        lineage when nothing deleted or expired the key since), else its add, read back a bounded
        way (the oldest version read when the add lies further back)."""
        if e.kind == "add":
            return e.changed_at
        if row is not None and row.version > e.version and not any(x.kind in ("delete", "expired") for x in since):
            return row.created_at
        assert e.occurred_at is not None
        older = self._log.history(tenant, e.namespace, e.key, before=(e.occurred_at, e.id), limit=MAX_LINEAGE_EVENTS)
        for x in older:  # newest first: the first add met starts the lineage
            if x.kind == "add":
                return x.changed_at
        return older[-1].changed_at if older else e.changed_at


def _live_then(e: TimelineEvent, known_at: datetime, since: list[TimelineEvent], row: StoredItem | None) -> bool:
    """Whether the version of event `e` (held at `known_at`: its latest) had not expired by then.
    The event's `expires_at` is the one it was written with; `Memories.refresh` extends it with no
    event, so when that one had passed, what came next decides. An update or a delete is only ever
    made to a live item (else a write is an add, and a delete nothing), so the version was live
    until then; an expiry's event is stamped at the expiry itself (the sweeper's `at`). A write not
    on the timeline yet (`since` empty) that continues the key's lineage (its `created_at` at or
    before `known_at`: an add starts a new one) was an update; an expiry tombstone says when."""
    if e.expires_at is None or e.expires_at > known_at:
        return True
    if since:
        first = since[0]
        if first.kind == "expired":
            return (first.expires_at or first.changed_at) > known_at
        return first.kind in ("update", "delete")
    if row is None or row.version <= e.version:
        return False
    if row.deleted == "expired":
        return row.updated_at > known_at
    return row.created_at <= known_at


@dataclass
class KnownAtView:
    """One searched scope at `known_at`: which keys changed since (from the timeline), the check
    that keeps the other, unchanged keys' current items, and the changed keys' versions then."""

    owner: KnownAt
    tenant: str
    known_at: datetime
    changed: dict[Ref, list[TimelineEvent]]
    # Keys whose current row was written after known_at but is not on the timeline yet (it
    # records a change a moment after the write): their version then is read as a changed key's.
    late: dict[Ref, None] = field(default_factory=dict)
    late_read: set[Ref] = field(default_factory=set)  # of those, the ones whose version then is read
    past_retention: int = 0
    held: list[tuple[TimelineEvent, datetime]] = field(default_factory=list)  # read, decrypted when searched
    # Each held version decrypted, and its texts embedded (`Search._ranked_versions`), once however
    # many times the view is searched (a query naming a time may rank twice): by event id, by
    # (memory id, version).
    opened: dict[str, Memory] = field(default_factory=dict)
    text_vectors: dict[tuple[str, int], list[list[float]]] = field(default_factory=dict)
    # The current items' hybrid weight (`Fusion.semantic_weight`) and query vector, set by their
    # search: the versions are scored with the same, so both parts are on one scale.
    weight: float | None = None
    embed: Callable[[], list[float]] | None = None
    # The mean direction of their semantic retriever's first page, which hybrid's distinct cosine
    # reads the versions' commonness against too (`core.ranking.commonness`); None: plain cosines.
    direction: list[float] | None = None

    def read(self, refs: list[Ref]) -> None:
        held, gone = self.owner.read(self.tenant, refs, self.known_at, self.changed)
        self.held += held
        self.past_retention += gone

    def admit(self, also: Admit | None) -> Admit:
        """The current items that were held at known_at (their version written by then, their key
        unchanged since), ANDed with `also` (`as_of`)."""
        def admit(memory: Memory) -> bool:
            ref = (memory.namespace, memory.key)
            if ref in self.changed:
                return False
            if memory.updated_at > self.known_at:
                self.note_late(ref)
                return False
            return also is None or also(memory)
        return admit

    def note_late(self, ref: Ref) -> None:
        """A key the search met whose current row (or tombstone) was written after known_at: unless
        the timeline named it, its version then is read as a changed key's (`versions`). At most
        MAX_KNOWN_AT_EVENTS, as the changed keys: one more is a 400, never a key left out."""
        if ref in self.changed or ref in self.late:
            return
        if len(self.late) >= MAX_KNOWN_AT_EVENTS:
            raise InvalidArgument(
                f"more than {MAX_KNOWN_AT_EVENTS} keys under this namespace changed since known_at (some not on "
                "the timeline yet): search a narrower namespace_prefix (or fewer layers), or a later known_at",
                details={"field": "known_at", "max_events": MAX_KNOWN_AT_EVENTS})
        self.late.setdefault(ref)

    def versions(self, condition_of: Callable[[dict[str, Any]], Any], also: Admit | None) -> list[Memory]:
        """The changed keys' versions held at known_at that the filter and `also` admit (after the
        current items' search, which notes the late keys). `condition_of`: what is left to check on
        a value with these policy attributes, None when they reject it (`FilterPlan.condition_given`)."""
        # Few: candidates the search opened. Each read once, however many searches of the view ran.
        refs = [ref for ref in self.late if ref not in self.changed and ref not in self.late_read]
        self.late_read.update(refs)
        self.read(refs)
        out = []
        for e, created_at in self.held:
            condition = condition_of(e.policy_attributes)
            if condition is None:  # the plaintext policy attributes reject it: never decrypted
                continue
            memory = self.opened.get(e.id)
            if memory is None:
                memory = self.opened[e.id] = self.owner.opened(e, created_at)
            if not condition.matches(lookup_in(memory.value)):
                continue
            if also is not None and not also(memory):
                continue
            out.append(memory)
        return out

    def newest_first(self, versions: list[Memory]) -> list[Memory]:
        return sorted(versions, key=lambda m: (-m.updated_at.timestamp(), m.id))


def keyword_scores(terms: Sequence[str], docs: list[list[str]]) -> list[tuple[float, float]]:
    """(keyword match 0..1, BM25) of each document (its texts) for a query's `terms` (the ones its
    keyword retriever looks up), each counted once, with the document frequencies of these documents
    alone. Linear in the terms and the documents' total size."""
    terms = list(dict.fromkeys(terms))
    counts = [term_counts(texts) for texts in docs]
    n = len(counts)
    if not terms or not n:
        return [(0.0, 0.0)] * n
    df = {t: sum(1 for c in counts if t in c) for t in terms}
    lengths = [sum(c.values()) for c in counts]
    avg = sum(lengths) / n
    weight = sum(idf(df[t], n) for t in terms)
    out = []
    for c, length in zip(counts, lengths):
        raw = sum(bm25(c[t], df[t], n, length, avg) for t in terms if c[t])
        out.append((round(keyword_match(raw, weight), 6), raw))
    return out


def texts_of(value: dict[str, Any]) -> list[str]:
    """A version's texts as the indexer reads a value without `index_fields` (every string
    leaf): an event does not carry the item's `index_fields`."""
    return [text for _, text in extract_texts(value, None, limit=MAX_INDEXED_FIELDS)]


def embedded_texts_of(value: dict[str, Any]) -> list[str]:
    """The texts of a version to embed: as the indexer picks them from a value without
    `index_fields` (`worth_embedding`), the first MAX_VERSION_TEXTS."""
    texts = extract_texts(value, None, limit=MAX_INDEXED_FIELDS)
    return [text for _, text in worth_embedding(texts)][:MAX_VERSION_TEXTS]


def merge_ranked(current: Iterable[Any], historical: Iterable[Any], score: Callable[[Any], float]) -> list[Any]:
    """Two best-first lists as one, by score to 6 decimals; on a tie the current item first."""
    return list(heapq.merge(current, historical, key=lambda r: -round(score(r) or 0.0, 6)))


def merge_newest_first(current: Iterable[Memory], historical: Iterable[Memory]) -> list[Memory]:
    """Two newest-first lists as one (a search by filter)."""
    return list(heapq.merge(current, historical, key=lambda m: -m.updated_at.timestamp()))
