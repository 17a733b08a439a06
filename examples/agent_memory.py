"""A LangGraph agent with long-term memory in memsvc: it learns facts in one conversation thread
and recalls them, by meaning, in another.

No LLM is needed: the "model" is a deterministic function. Threads are LangGraph's (a checkpointer
keeps each thread's messages); what crosses threads is only what the store holds.

Run it against a local server (`make run` in another shell):

    MEMORY_SERVICE_URL=http://127.0.0.1:8000 \\
    MEMORY_SERVICE_TOKEN=$(.venv/bin/memsvc token --sub alice) \\
    .venv/bin/python examples/agent_memory.py --user alice
"""

from __future__ import annotations

import argparse
import hashlib
import re
from dataclasses import dataclass

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore

from memsvc_client import MemsvcStore

_REMEMBER = re.compile(r"^\s*remember(?:\s+that)?\s+(?P<fact>.+?)\s*$", re.IGNORECASE | re.DOTALL)


@dataclass
class Context:
    """Per-run context: whose memories these are."""

    user_id: str


class State(MessagesState):
    recalled: list[str]


def _namespace(runtime: Runtime[Context]) -> tuple[str, ...]:
    # The service's default policy lets a user reach ["user", <their id>, ...].
    return ("user", runtime.context.user_id, "memories")


def _last_text(state: State) -> str:
    return str(state["messages"][-1].content)


def route(state: State) -> str:
    return "remember" if _REMEMBER.match(_last_text(state)) else "recall"


def remember(state: State, runtime: Runtime[Context]) -> dict:
    """Write the fact to the store. The key is derived from the text, so telling the agent the
    same thing twice (or re-running this example) updates one memory instead of adding another."""
    fact = _REMEMBER.match(_last_text(state)).group("fact").rstrip(".")
    key = hashlib.sha256(fact.lower().encode()).hexdigest()[:16]
    runtime.store.put(_namespace(runtime), key, {"text": fact, "kind": "fact"})
    return {"recalled": [], "messages": [AIMessage(f"Got it, I'll remember that {fact}.")]}


def recall(state: State, runtime: Runtime[Context]) -> dict:
    """Semantic search over this user's memories, from any thread."""
    hits = runtime.store.search(_namespace(runtime), query=_last_text(state), filter={"kind": "fact"}, limit=3)
    return {"recalled": [hit.value["text"] for hit in hits]}


def respond(state: State) -> dict:
    """The deterministic stand-in for a chat model: answer from the best memory."""
    if not state.get("recalled"):
        return {"messages": [AIMessage("I don't know that yet. Tell me with 'remember that ...'.")]}
    return {"messages": [AIMessage(f"From memory: {state['recalled'][0]}.")]}


def build_graph(store: BaseStore):
    builder = StateGraph(State, context_schema=Context)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_node("respond", respond)
    builder.add_conditional_edges(START, route, ["remember", "recall"])
    builder.add_edge("recall", "respond")
    builder.add_edge("remember", END)
    builder.add_edge("respond", END)
    return builder.compile(checkpointer=InMemorySaver(), store=store)


CONVERSATIONS = {
    "thread-1": [
        "Remember that I take my coffee black, no sugar.",
        "Remember that my sister Ana lives in Lisbon.",
        "Remember that I am allergic to peanuts.",
    ],
    "thread-2": [
        "How do I like my coffee?",
        "Which city does Ana live in?",
        "Do I have any food allergies?",
    ],
}


def main(store: BaseStore | None = None, user_id: str = "alice", *, quiet: bool = False) -> list[tuple[str, str, str]]:
    """Run both conversations; return (thread, user message, reply) for each turn."""
    own_store = store is None
    store = store if store is not None else MemsvcStore()  # MEMORY_SERVICE_URL, MEMORY_SERVICE_TOKEN
    try:
        graph = build_graph(store)
        transcript = []
        for thread_id, messages in CONVERSATIONS.items():
            config = {"configurable": {"thread_id": thread_id}}
            for text in messages:
                state = graph.invoke({"messages": [HumanMessage(text)]}, config, context=Context(user_id=user_id))
                reply = str(state["messages"][-1].content)
                transcript.append((thread_id, text, reply))
                if not quiet:
                    print(f"[{thread_id}] {user_id}: {text}\n[{thread_id}] agent: {reply}")
        return transcript
    finally:
        if own_store:
            store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--user", default="alice", help="the token's subject (default: alice)")
    main(user_id=parser.parse_args().user)
