"""Conversation-aware indexing of session messages (issue 23), on both backends: a message is
indexed with its date, its speaker and the turn before it, so a question about what someone said
then finds the turn; what is shown is the message's own content; plain items are indexed as before;
another user's messages never come back."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

import pytest

from memsvc.core.errors import InvalidArgument
from memsvc.core.message_context import PREVIOUS_TURN_CHARS, TURN_FIELD
from memsvc.core.sessions import message_key
from memsvc.service.memories import PutMemory
from memsvc.service.recall import RecallQuery
from memsvc.service.search import SearchQuery
from memsvc.service.sessions import AppendMessage, CreateSession, ListMessages
from tests.conftest import alice, bob

SESSIONS = ["user", "alice", "sessions"]
QUESTION = "What did Maria tell about her pottery in May?"


def on(clock, year, month, day):
    clock.current = datetime(year, month, day, 15, 30, tzinfo=timezone.utc)


def conversation(backend, session_id, turns, caller=None):
    """Append (name, content) turns to a new session; returns their keys, in order."""
    sessions = backend.app.services.sessions
    sessions.create(caller or alice(), CreateSession(session_id=session_id))
    return [message_key(sessions.append(caller or alice(), session_id,
                                        AppendMessage(role="user", name=name, content=content)).seq)
            for name, content in turns]


def search(backend, query, caller=None, prefix=SESSIONS, **kw):
    return backend.search.search(caller or alice(), SearchQuery(namespace_prefix=prefix, query=query, **kw))


def recall(backend, query, caller=None, prefix=SESSIONS):
    return backend.app.services.recall.recall(caller or alice(), RecallQuery(query=query, namespace_prefix=prefix,
                                                                             min_score=0))


def embedded(backend) -> list[str]:
    return [text for call in backend.embedder.calls for text in call]


def pottery_months(backend, clock, caller=None, user="alice"):
    """Maria and Dev talk about pottery in April, May and June; returns the key of Maria's May turn."""
    on(clock, 2023, 4, 3)
    conversation(backend, "april", [
        ("Dev", "How was your weekend?"),
        ("Maria", "I signed up for a pottery class at the community center."),
        ("Dev", "Nice, pottery sounds relaxing."),
    ], caller)
    on(clock, 2023, 5, 8)
    may = conversation(backend, "may", [
        ("Dev", "Any news since we last talked?"),
        ("Maria", "My first pottery bowl came out of the kiln, a bit lopsided but I love it."),
        ("Dev", "I should try pottery too."),
        ("Dev", "Are you still running in the mornings?"),
        ("Maria", "Only on Sundays now, the weather was lovely for it."),
    ], caller)
    on(clock, 2023, 6, 12)
    conversation(backend, "june", [
        ("Maria", "I quit pottery, the class moved to weekends."),
        ("Dev", "That is a shame."),
    ], caller)
    backend.drain()
    return ("user", user, "sessions", "may", "messages"), may[1]


class TestIndexedAsATurn:
    def test_the_texts_hold_date_speaker_and_the_turn_before(self, backend, clock):
        on(clock, 2023, 5, 8)
        conversation(backend, "s", [("Dev", "Did you end up adopting?"), ("Maria", "Yes! A beagle named Rufus.")])
        backend.drain()
        texts = embedded(backend)
        assert sorted(texts) == sorted([
            '(8 May 2023) Dev said, "Did you end up adopting?"',
            'On 8 May 2023 (2023-05-08), Dev said, "Did you end up adopting?"',  # the first turn: none before it
            '(8 May 2023) Maria said, "Yes! A beagle named Rufus."',
            'On 8 May 2023 (2023-05-08), in reply to "Did you end up adopting?", Maria said, "Yes! A beagle named '
            'Rufus."'])

    def test_a_message_without_a_name_is_its_roles_turn(self, backend, clock):
        on(clock, 2024, 12, 31)
        sessions = backend.app.services.sessions
        sessions.create(alice(), CreateSession(session_id="s"))
        sessions.append(alice(), "s", AppendMessage(role="user", content="Book me a table for two."))
        sessions.append(alice(), "s", AppendMessage(role="assistant", content="Done, at eight."))
        backend.drain()
        assert ('On 31 December 2024 (2024-12-31), in reply to "Book me a table for two.", assistant said, '
                '"Done, at eight."') in embedded(backend)

    def test_the_turn_before_is_cut(self, backend, clock):
        on(clock, 2023, 5, 8)
        long = "word " * 200
        conversation(backend, "s", [("Dev", long), ("Maria", "Indeed.")])
        backend.drain()
        [text] = [t for t in embedded(backend) if t.startswith("On 8 May 2023 (2023-05-08), in reply to")]
        quoted = text.split('"')[1]
        assert quoted.endswith("…") and len(quoted) <= PREVIOUS_TURN_CHARS + 1

    def test_appends_at_once_each_reply_to_the_turn_the_store_put_before_it(self, backend, clock):
        """The turn before is the one under seq - 1, whichever append took its seq first."""
        on(clock, 2023, 5, 8)
        sessions = backend.app.services.sessions
        sessions.create(alice(), CreateSession(session_id="s"))
        with ThreadPoolExecutor(6) as pool:
            list(pool.map(lambda n: sessions.append(alice(), "s", AppendMessage(role="user", content=f"turn {n}")),
                          range(12)))
        backend.drain()
        said = [m.content for m in sessions.messages(alice(), "s", ListMessages()).messages]
        assert sorted(said) == sorted(f"turn {n}" for n in range(12))
        texts = set(embedded(backend))
        assert f'On 8 May 2023 (2023-05-08), user said, "{said[0]}"' in texts
        for before, reply in zip(said, said[1:]):
            assert f'On 8 May 2023 (2023-05-08), in reply to "{before}", user said, "{reply}"' in texts

    def test_a_deleted_turn_before_gives_no_context(self, backend, clock):
        on(clock, 2023, 5, 8)
        first, _ = conversation(backend, "s", [("Dev", "Did you end up adopting?"), ("Maria", "Yes! Rufus.")])
        backend.memories.delete(alice(), ["user", "alice", "sessions", "s", "messages"], first)
        backend.drain()
        assert embedded(backend) == ['(8 May 2023) Maria said, "Yes! Rufus."',
                                     'On 8 May 2023 (2023-05-08), Maria said, "Yes! Rufus."']

    def test_the_name_is_kept_and_shown(self, backend):
        conversation(backend, "s", [("Maria López", "Hola"), (None, "Hi")])
        got = backend.app.services.sessions.messages(alice(), "s", ListMessages()).messages
        assert [(m.name, m.role, m.content) for m in got] == [("Maria López", "user", "Hola"), (None, "user", "Hi")]

    @pytest.mark.parametrize("name", ["", "   ", "x" * 65, 7])
    def test_a_bad_name_is_refused_and_nothing_is_written(self, backend, name):
        backend.app.services.sessions.create(alice(), CreateSession(session_id="s"))
        with pytest.raises(InvalidArgument) as refused:
            backend.app.services.sessions.append(alice(), "s", AppendMessage(role="user", content="hello", name=name))
        assert refused.value.details["field"] == "name"
        assert backend.app.services.sessions.messages(alice(), "s", ListMessages()).messages == []

    def test_a_name_of_64_characters_is_taken(self, backend):
        assert conversation(backend, "s", [("ñ" * 64, "hello")]) == [message_key(1)]


MESSAGES = ["user", "alice", "sessions", "s", "messages"]
TRIP = [("Dev", "How was the trip?"), ("Maria", "We saw flamingos at the lagoon."), ("Dev", "Lovely, send pictures.")]


def turn_vector(backend, key):
    """The stored vector of the message's text with its context, and its memory id."""
    row = backend.store.get("acme", tuple(MESSAGES), key)
    name = backend.sealer.field_id("acme", TURN_FIELD)
    return backend.vectors.vectors_of("acme", [(row.id, name)])[(row.id, name)]


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b))


class TestAChangedTurnLeavesTheNext:
    """A message's entries quote the turn before it; deleting or rewriting that turn, by any path,
    re-indexes the message when the change is indexed, so the turn's old words leave them."""

    def test_a_deleted_turn_leaves_the_next_turns_index_entries(self, backend, clock):
        on(clock, 2023, 5, 8)
        keys = conversation(backend, "s", TRIP)
        backend.drain()
        assert {i.key for i in search(backend, "flamingos", mode="keyword")} == {keys[1], keys[2]}
        deleted = backend.embedder.embed(["We saw flamingos at the lagoon."])[0]
        before = cosine(turn_vector(backend, keys[2]), deleted)
        backend.embedder.calls.clear()

        backend.memories.delete(alice(), MESSAGES, keys[1])  # what DELETE /v1/memories does
        backend.drain()
        assert search(backend, "flamingos", mode="keyword") == []
        assert search(backend, "lagoon", mode="keyword") == []
        assert embedded(backend) == ['(8 May 2023) Dev said, "Lovely, send pictures."',
                                     'On 8 May 2023 (2023-05-08), Dev said, "Lovely, send pictures."']
        assert cosine(turn_vector(backend, keys[2]), deleted) < before
        assert keys[2] in {i.key for i in search(backend, "pictures", mode="keyword")}  # still found by its own
        assert keys[2] in {i.key for i in search(backend, "Lovely, send pictures.")}

    def test_a_rewritten_turn_is_what_the_next_turn_quotes(self, backend, clock):
        on(clock, 2023, 5, 8)
        keys = conversation(backend, "s", TRIP)
        backend.drain()
        backend.memories.put(alice(), PutMemory(namespace=MESSAGES, key=keys[1], index_fields=["content"],
                                                value={"role": "user", "name": "Maria", "content": "We saw herons."}))
        backend.drain()
        assert search(backend, "flamingos", mode="keyword") == []
        assert {i.key for i in search(backend, "herons", mode="keyword")} == {keys[1], keys[2]}
        assert ('On 8 May 2023 (2023-05-08), in reply to "We saw herons.", Dev said, "Lovely, send pictures."'
                in embedded(backend))

    def test_a_turn_deleted_while_the_next_is_indexed_inline_leaves_it_too(self, backend, clock):
        """The next turn is indexed by a request (`sync_index`) that read the turn before just
        before it was deleted, and the deletion's re-index of it ran before that request wrote:
        the request reads the turn before again after its write, and indexes the turn again."""
        on(clock, 2023, 5, 8)
        keys = conversation(backend, "s", TRIP[:2])
        backend.drain()
        embed = backend.embedder.embed
        deleted = []

        def delete_the_turn_before_once(texts):
            if not deleted and any("in reply to" in t for t in texts):
                deleted.append(backend.memories.delete(alice(), MESSAGES, keys[1]))
                backend.drain()  # the deletion is indexed now, before this request writes
            return embed(texts)

        backend.embedder.embed = delete_the_turn_before_once
        backend.memories.put(alice(), PutMemory(namespace=MESSAGES, key=message_key(3), index_fields=["content"],
                                                value={"role": "user", "name": "Dev", "content": "Send pictures."},
                                                sync_index=True))
        assert deleted
        backend.drain()
        assert search(backend, "flamingos", mode="keyword") == []
        assert embedded(backend)[-2:] == ['(8 May 2023) Dev said, "Send pictures."',
                                          'On 8 May 2023 (2023-05-08), Dev said, "Send pictures."']

    @pytest.mark.parametrize("indexer", ["behind", "keeping up"])
    def test_deleting_a_session_indexes_none_of_its_messages_again(self, backend, clock, monkeypatch, indexer):
        """Its sweep deletes the last message first, so each deletion the indexer takes in finds the
        message after it deleted already, whether it runs after the sweep or between its deletes."""
        on(clock, 2023, 5, 8)
        conversation(backend, "s", [("Dev" if n % 2 else "Maria", f"turn number {n}") for n in range(30)])
        backend.drain()
        backend.embedder.calls.clear()
        if indexer == "keeping up":
            delete_current = backend.memories.delete_current

            def then_index(*args, **kwargs):
                deleted = delete_current(*args, **kwargs)
                backend.drain()
                return deleted

            monkeypatch.setattr(backend.memories, "delete_current", then_index)
        backend.app.services.sessions.delete(alice(), "s")
        backend.drain()
        assert embedded(backend) == []
        assert search(backend, "turn number", mode="keyword") == []


class TestFoundByWhatWasSaid:
    def test_who_said_what_in_which_month(self, backend, clock):
        """Keywords rank Maria's May turn first: Maria's pottery turns of April and June, and Dev's of
        May, share its words but not its speaker and month. (The fake model of these tests ranks
        by shared words, short texts first, so meaning is tested with the real one: the API tests.)"""
        may = pottery_months(backend, clock)
        shown = "My first pottery bowl came out of the kiln, a bit lopsided but I love it."
        found = search(backend, QUESTION, mode="keyword")
        assert (found[0].namespace, found[0].key) == may
        assert found[0].value == {"role": "user", "name": "Maria", "content": shown, "seq": 2}  # no context in it
        ranked = [(i.namespace, i.key) for i in search(backend, QUESTION)]
        assert may in ranked[:3]
        assert all(ranked.index(may) < ranked.index((("user", "alice", "sessions", month, "messages"), key))
                   for month, key in (("april", message_key(2)), ("june", message_key(1))))
        top = [((r.memory.namespace, r.memory.key), r.content) for r in recall(backend, QUESTION).memories[:3]]
        assert (may, shown) in top

    def test_the_turn_before_finds_an_answer_that_does_not_say_it(self, backend, clock):
        on(clock, 2023, 5, 8)
        keys = conversation(backend, "s", [
            ("Maria", "I went to the shelter on Saturday."),
            ("Dev", "Did you end up adopting?"),
            ("Maria", "Yes! A beagle named Rufus."),
            ("Maria", "Rufus loves the park already."),
            ("Dev", "My neighbour has a dog that barks all night."),
            ("Dev", "What did you do at the weekend?"),
            ("Maria", "Mostly cleaning, to be honest."),
        ])
        backend.drain()
        answer = keys[2]
        found = search(backend, "what dog did Maria adopt", mode="keyword")
        assert found[0].key == answer
        assert "adopt" not in found[0].value["content"]  # its own words do not say it: the turn before does
        assert {i.key for i in search(backend, "adopt", mode="keyword")} == {keys[1], answer}
        # The fake model ranks by shared words ("adopting" is not "adopt" to it): the real one, in the
        # API tests, ranks the answer first by meaning too.
        assert answer in [i.key for i in search(backend, "what dog did Maria adopt")][:2]
        recalled = {r.memory.key: r.content for r in recall(backend, "what dog did Maria adopt").memories[:2]}
        assert recalled[answer] == "Yes! A beagle named Rufus."

    def test_another_users_messages_never_appear(self, backend, clock):
        pottery_months(backend, clock, caller=bob(), user="bob")
        may = pottery_months(backend, clock)
        for prefix in (SESSIONS, ["user", "alice"]):
            found = search(backend, QUESTION, prefix=prefix, mode="keyword", limit=100)
            assert (found[0].namespace, found[0].key) == may
            found += search(backend, QUESTION, prefix=prefix, limit=100)
            assert all(i.namespace[:2] == ("user", "alice") for i in found), prefix
            recalled = recall(backend, QUESTION, prefix=prefix).memories
            assert recalled and all(r.memory.namespace[:2] == ("user", "alice") for r in recalled), prefix
        # Each user's first turn of a session has no turn before it: none is taken from the other's.
        assert embedded(backend).count('On 3 April 2023 (2023-04-03), Dev said, "How was your weekend?"') == 2
        assert not any("in reply to" in t and 'said, "How was your weekend?"' in t for t in embedded(backend))


class TestPlainItemsUnchanged:
    def test_plain_items_are_indexed_as_their_own_texts(self, backend, clock):
        on(clock, 2023, 5, 8)
        message_like = {"role": "user", "name": "Maria", "content": "Yes! A beagle named Rufus."}
        put = backend.memories.put
        put(alice(), PutMemory(namespace=["user", "alice", "notes"], key=message_key(2), value=message_like,
                               index_fields=["content"]))
        # Under a session's messages, but not as an append writes a message: another key, other fields.
        messages = ["user", "alice", "sessions", "s", "messages"]
        put(alice(), PutMemory(namespace=messages, key="summary", value=message_like, index_fields=["content"]))
        put(alice(), PutMemory(namespace=messages, key=message_key(3), value=message_like))
        put(alice(), PutMemory(namespace=["user", "alice", "notes"], key="n", value={"text": "tea at five"}))
        backend.drain()
        assert sorted(embedded(backend)) == sorted([  # the third's one-word leaves: keywords only (`worth_embedding`)
            "Yes! A beagle named Rufus.", "Yes! A beagle named Rufus.", "Yes! A beagle named Rufus.", "tea at five"])
        assert search(backend, "May 2023 said", prefix=["user", "alice"], mode="keyword") == []
        # Not embedded, yet still words of the keyword index: only the item without index_fields names Maria there.
        assert [m.key for m in search(backend, "Maria", prefix=["user", "alice"], mode="keyword")] == [message_key(3)]
