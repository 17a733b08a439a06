"""A LangGraph ReAct agent that learns from conversation alone: in one conversation thread the
user mentions a preference in passing; in another, days later, the agent uses it. Nobody asks it to
remember, and the model never calls a memory tool.

- `append_turn_hook` appends each turn (what the user said, what the agent answered) to the
  thread's session in memsvc. The session is created with `extract="on_close"`.
- When the conversation ends, the app closes the session: memsvc extracts what the user said of
  themselves into typed memories ("User prefers window seats on flights", a preference), each
  consolidated with what it knew (a repeat changes nothing, a correction replaces the old one).
- `recall_hook` recalls, before each model call, the user's learnt memories about the last thing
  the user said, and gives them to the model as a system message.

Threads are LangGraph's (the checkpointer keeps each thread's messages apart); what crosses
threads is only what memsvc learnt.

No LLM is needed: `ScriptedChatModel` stands in for one with two fixed rules, so the example runs
offline; memsvc's own extractor is its deterministic one unless the server is given a model
(`MEMSVC_LLM_URL`). Put a real chat model in place of the scripted one and nothing else changes.
(LangGraph 1.x marks `create_react_agent` deprecated in favour of `langchain.agents.create_agent`,
from the separate `langchain` package, which takes middleware instead of these hooks.)

Run it against a local server (`make run` in another shell):

    MEMORY_SERVICE_URL=http://127.0.0.1:8000 \\
    MEMORY_SERVICE_TOKEN=$(.venv/bin/memsvc token --sub alice) \\
    .venv/bin/python examples/langgraph_agent.py --user alice
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent

from memsvc_client import MemsvcClient, append_turn_hook, recall_hook

CONVERSATIONS = [
    ("monday", "I prefer window seats on flights."),
    ("friday", "Which seat should I book on my flight to Lisbon?"),
]
_RECALLED_LINE = re.compile(r"^- (?:\([a-z ]+\) )?(?P<content>.+)$")


class ScriptedChatModel(BaseChatModel):
    """Not a language model: two rules in a chat model's clothes. A statement gets "Noted."; a
    question gets the first thing memory gave it (the system message `recall_hook` adds), or an
    admission that it does not know."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    @staticmethod
    def _reply(messages: list[BaseMessage]) -> AIMessage:
        if not str(messages[-1].content).rstrip().endswith("?"):
            return AIMessage("Noted.")
        recalled = [line for m in messages if isinstance(m, SystemMessage) for line in str(m.content).splitlines()
                    if _RECALLED_LINE.match(line)]
        if not recalled:
            return AIMessage("I don't know yet.")
        return AIMessage(f"Based on what you told me before: {_RECALLED_LINE.match(recalled[0])['content']}")


@dataclass
class Turn:
    thread: str
    said: str
    reply: str


def main(client: MemsvcClient | None = None, user_id: str = "alice", *, quiet: bool = False) -> list[Turn]:
    """Run the two conversations as `user_id` (the token's subject); `client` defaults to
    MEMORY_SERVICE_URL + MEMORY_SERVICE_TOKEN. Each run starts both sessions afresh."""
    client = client or MemsvcClient()
    # What memsvc learnt about the user: their user layer's typed memories (not the raw messages).
    learnt = ["user", user_id, "memories"]
    agent = create_react_agent(ScriptedChatModel(), [], checkpointer=InMemorySaver(),
                               pre_model_hook=recall_hook(client, namespace_prefix=learnt),
                               post_model_hook=append_turn_hook(client))  # the session is the thread
    transcript = []
    for thread, said in CONVERSATIONS:
        client.delete_session(thread)
        client.create_session(thread, extract="on_close")
        state = agent.invoke({"messages": [("user", said)]}, {"configurable": {"thread_id": thread}})
        transcript.append(Turn(thread, said, str(state["messages"][-1].content)))
        if not quiet:
            print(f"[{thread}] user: {said}")
            print(f"[{thread}] agent: {transcript[-1].reply}")
        closed = client.close_session(thread)  # the conversation is over: memsvc learns from it
        if not quiet and closed.get("promoted") is not None:
            print(f"[{thread}] (session closed; memsvc learnt from it)")
    return transcript


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--user", default="alice", help="the token's subject (default: alice)")
    main(user_id=parser.parse_args().user)
