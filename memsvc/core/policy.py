"""The policy engine: Rego bundles compiled and evaluated in-process with regorus.

Four entrypoints: `data.memories.authz.allow`, `data.memories.attributes.attributes` and
`data.memories.search.result` (API.md "Policies (Rego)"), and `data.memories.governance.violations`
(API-AGENT.md "Governance and limits"). A bundle without a `memories.governance` package gets the
built-in governance.rego, so a bundle written before governance existed stays governed.

Every evaluation has a budget, so that one tenant's policy cannot stall the process for everyone
(an `Engine` holds the GIL while it evaluates). regorus's interpreter has no limit its Python
binding can set, but its Rego VM (`Program` + `Rvm`) stops any execution after 25,000 instructions
(its built-in default, which the binding cannot change either). So each evaluation runs first on
the VM, as a meter: over budget, it fails with `PolicyBudgetExceeded`; within budget, the
interpreter, whose semantics the service has always had (strict builtin errors, conflict errors),
gives the answer, doing no more iterations than the VM just did. The count bounds iterations, not
the cost of one builtin call (`numbers.range(1, 1e8)` is one instruction); see docs/api.md, "Policies".

An authz decision or a search scope is remembered per compiled bundle, by its whole input
(`DECISIONS_PER_BUNDLE` of them, least recently used first out): a request that repeats one, such as
the same caller reading the same key or searching the same scope, skips both runs. The answer
depends on nothing but the bundle and the input, unless the bundle names a builtin that reads the
clock, randomness or the network (`_IMPURE_BUILTINS`): such a bundle is evaluated every time. A
policy upload compiles a new bundle, so it starts with no decisions. Only answers are remembered,
never failures: an input over budget or in error is evaluated, and fails, every time.

regorus objects are "unsendable": one used, or even dropped, on a thread other than the one that
created it raises a Rust panic. So every thread compiles its own engine and VM programs from the
bundle sources (about a millisecond) and keeps them in a module-level thread-local cache keyed by
the sources' digest; they never leave the thread that built them.

Every input is handed over as JSON that regorus can hold (`_input_json`), and an engine failure
becomes an error in our words that names the policy file, line and column (`_policy_error`):
regorus's own text quotes the policy source and, at run time, the input it failed on.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib import resources
from typing import Any, Iterator, Mapping, Sequence

import regorus
from regorus import _native as regorus_vm  # celine-regorus re-exports only Engine; Program and Rvm live here

from memsvc.core import policy_sandbox
from memsvc.core.errors import InvalidArgument, ProviderError, echoed

__all__ = [
    "BUILTIN_VERSION",
    "POLICY_FILE_NAME",
    "engines_on_this_thread",
    "ENGINES_PER_THREAD",
    "default_bundle",
    "PolicyBundle",
    "CompiledPolicies",
    "compile_bundle",
    "MAX_FILES",
    "MAX_BUNDLE_BYTES",
    "INSTRUCTION_BUDGET",
    "PolicyBudgetExceeded",
    "DECISIONS_PER_BUNDLE",
]

log = logging.getLogger(__name__)

MAX_FILES = 64
BUILTIN_VERSION = "builtin"  # the built-in bundle's version; any other's is a prefix of its sources' sha256
# Compiling costs about 4 s per MB of source (a 15 MB bundle took 74 s and a 2 GB syntax tree), so a
# bundle is small enough to compile well within policy_sandbox.COMPILE_DEADLINE_S.
MAX_BUNDLE_BYTES = 256 * 1024

_DEFAULT_FILES = ("authz.rego", "attributes.rego", "search.rego", "governance.rego")
_REQUIRED_PACKAGES = ("memories.authz", "memories.attributes", "memories.search")
_GOVERNANCE_PACKAGE, _GOVERNANCE_FILE = "data.memories.governance", "governance.rego"
_AUTHZ = "data.memories.authz.allow"
_ATTRIBUTES = "data.memories.attributes.attributes"
_SEARCH = "data.memories.search.result"
_GOVERNANCE = "data.memories.governance.violations"
_UNDEFINED = '"<undefined>"'  # what eval_rule_as_json returns for an undefined rule
POLICY_FILE_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,95}\.rego$"
_FILE_NAME = re.compile(POLICY_FILE_NAME)
_LOCATION = re.compile(r"-->\s*(\S+?):(\d+):(\d+)")  # how regorus points into a policy
_REASON = re.compile(r"^error: (.*)$", re.MULTILINE)
# regorus's reasons in our words (its text quotes the source and, at run time, the input);
# matched on its `error:` line, first hit wins.
_REASONS = (
    ("Missing package declaration", "the file must start with a package declaration"),
    ("`if` keyword is required", "a rule body needs the `if` keyword (Rego v1)"),
    ("`with` keyword", "`with` is not supported"),
    ("Unknown function", "a call to a function that does not exist"),
    ("is unsafe", "a variable that is never bound"),
    ("conflicts with", "conflicting definitions of a rule"),
    ("multiple outputs", "a rule or function that gives more than one value"),
    ("divide by zero", "a division by zero"),
    ("invalid regex", "an invalid regular expression"),
    ("expects", "a built-in function given an argument of the wrong type"),
    ("could not serialize", "a number out of range"),  # regorus holds no other value it cannot serialize
    ("number out of range", "a number out of range"),
    ("expecting", "a syntax error"),
    ("unexpected", "a syntax error"),
)
# Numbers regorus cannot hold: it parses and prints doubles a few units in the last place off, so
# one at the top of the range (1.7976931348623157e308) becomes infinity, which json.marshal and the
# answer cannot serialize, and it refuses an integer beyond a double's range. Below 1e308 in
# magnitude nothing overflows; an integer within 64 bits it holds exactly.
_MAX_MAGNITUDE = 1e308
# Such a number in JSON text: a float's exponent e+308, or an integer of 309 digits (seen as a run of
# 309 zeros once every digit reads as one). A string that looks alike only costs the exact walk.
_DIGITS_AS_ZERO = str.maketrans("0123456789", "0" * 10)
_HUGE_INTEGER = "0" * 309
ENGINES_PER_THREAD = 4
INSTRUCTION_BUDGET = 25_000  # the Rego VM's own limit (RegoVM::new), which the Python binding cannot set
_OVER_BUDGET = "exceeded maximum instruction limit"
_NO_DEFINITION = ("no definitions found for rule path", "not a valid rule path")  # the VM compiler's words
DECISIONS_PER_BUNDLE = 1024
_MAX_REMEMBERED_INPUT = 4096  # characters of input JSON: at most 4 MB of remembered inputs per bundle
# Builtins whose answer is not a function of their arguments (a mention in a comment only costs
# the memo). Rego cannot call a builtin without naming it.
_IMPURE_BUILTINS = re.compile(
    r"\b(time\.now_ns|rand\.|uuid\.|http\.send|net\.|opa\.runtime|io\.jwt\.decode_verify|print|trace)\b")

# Sample contexts for the smoke evaluation in compile_bundle: a plain user and a trusted service.
_SAMPLE_CONTEXTS = (
    {
        "tenant_id": "default",
        "user_id": "alice",
        "client_id": "smoke-test",
        "roles": ["user"],
        "principal_type": "user",
        "jwt_claims": {"sub": "alice", "roles": ["user"]},
    },
    {
        "tenant_id": "default",
        "user_id": "arn:aws:iam::123456789012:role/backend",
        "client_id": None,
        "roles": ["service"],
        "principal_type": "iam",
        "jwt_claims": {},
    },
)


@cache
def _default_sources() -> tuple[tuple[str, str], ...]:
    # Anchored on the regular package memsvc.core: Python 3.11's importlib.resources cannot read
    # a namespace package (memsvc, memsvc.policies) under a setuptools editable install.
    folder = resources.files("memsvc.core").parent / "policies"
    return tuple((name, (folder / name).read_text(encoding="utf-8")) for name in _DEFAULT_FILES)


def default_bundle() -> dict[str, str]:
    """The built-in policy sources, file name -> Rego (a fresh copy on every call)."""
    return dict(_default_sources())


def __getattr__(name: str) -> Any:
    if name == "DEFAULT_BUNDLE":  # loaded on first use, never at import
        return default_bundle()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class PolicyBudgetExceeded(InvalidArgument):
    """A policy evaluation ran past `INSTRUCTION_BUDGET`, its deadline or its worker's memory:
    only the request that asked fails."""

    def __init__(self, rule: str, *, limit: str = "instructions") -> None:
        budget, details = {
            "instructions": (f"its evaluation budget of {INSTRUCTION_BUDGET} Rego VM instructions",
                             {"budget_instructions": INSTRUCTION_BUDGET}),
            "deadline": (f"its evaluation deadline of {policy_sandbox.RUN_DEADLINE_S:g} s",
                         {"budget_seconds": policy_sandbox.RUN_DEADLINE_S}),
            "died": ("the memory or stack an evaluation may use", {}),
        }[limit]
        super().__init__(f"the tenant's policy {rule} exceeded {budget}; an admin must simplify it",
                         details={"rule": rule, **details})


def _interrupted() -> ProviderError:
    """A policy worker stopped mid-call by the server or by a stop signal
    (`policy_sandbox._Worker._how_it_ended`), or starved of CPU by the machine's load
    (`policy_sandbox._Budget`): the tenant's policy did nothing wrong, and the same request may
    succeed when sent again."""
    return ProviderError("the policy evaluation was interrupted; send the request again")


class _EngineError(Exception):
    """regorus's error text, from a worker (`_is_engine_error` and `_policy_error` read it)."""


@dataclass(frozen=True)
class PolicyBundle:
    """A policy bundle: its version ("builtin" or a sha256 prefix) and sources by file name."""

    version: str
    policies: dict[str, str] = field(hash=False)


class CompiledPolicies:
    """A validated bundle, safe to evaluate from any number of threads at once."""

    def __init__(self, bundle: PolicyBundle, digest: str, *, sandboxed: bool = False) -> None:
        self._bundle = bundle
        self._sources = dict(bundle.policies)  # what engines are built from, whatever callers do to bundle
        self._digest = digest
        self._sandboxed = sandboxed
        pure = not any(_IMPURE_BUILTINS.search(source) for source in self._sources.values())
        self._decide = lru_cache(maxsize=DECISIONS_PER_BUNDLE)(self._run) if pure else self._run

    @property
    def bundle(self) -> PolicyBundle:
        """The bundle these policies were compiled from."""
        return self._bundle

    @property
    def digest(self) -> str:
        """The sha256 of the bundle's sources."""
        return self._digest

    def allow(self, operation: str, namespace: Sequence[str], key: str | None, context: dict) -> bool:
        """Whether the authz policy allows this; undefined, non-true or any error is a deny."""
        try:
            decision = self._eval(_AUTHZ, _authz_input(operation, namespace, key, context), remember=True)
        except (PolicyBudgetExceeded, ProviderError):
            raise  # a clear error rather than a deny that looks like a permission problem
        except BaseException as exc:
            if not _is_engine_error(exc):
                raise
            return False
        return decision is True

    def extract_attributes(
        self,
        namespace: Sequence[str],
        key: str,
        value: Any,
        attributes: Mapping[str, Any] | None,
        context: dict,
    ) -> dict[str, Any]:
        """The attributes to store with a write; `{}` when the policy is undefined."""
        inp = {
            "namespace": list(namespace),
            "key": key,
            "value": value,
            "attributes": dict(attributes or {}),
            "context": context,
        }
        result = self._eval_or_raise(_ATTRIBUTES, inp, "attribute extraction")
        if result is None:
            return {}
        # Never _describe(result): an attribute may quote the value.
        if not isinstance(result, dict):
            raise InvalidArgument("attribute extraction policy must return an object of scalars or lists of scalars")
        for name, value in result.items():
            if not _is_attribute_value(value):
                shown = str(name)[:64]  # a policy may name attributes after the value: never echo all of it
                raise InvalidArgument(
                    f"attribute extraction policy returned attribute {shown!r} that is not a scalar or a list of "
                    "scalars", details={"attribute": shown})
        return result

    def inject_search(
        self,
        operation: str,
        namespace_prefix: Sequence[str],
        filter_obj: Mapping[str, Any] | None,
        context: dict,
    ) -> tuple[list[str], dict[str, Any]]:
        """The effective (namespace_prefix, attribute_filter) for a search, list or events call.

        An undefined result or field keeps the requested prefix and adds no filter; authz still
        decides on the prefix afterwards.
        """
        requested = list(namespace_prefix)
        inp = {
            "operation": operation,
            "namespace_prefix": requested,
            "filter": dict(filter_obj or {}),
            "context": context,
        }
        result = self._eval_or_raise(_SEARCH, inp, "search filter injection", remember=True)
        if result is None:
            return requested, {}
        if not isinstance(result, dict):
            raise InvalidArgument(
                f"search filter injection policy returned {_describe(result)}; expected an object"
            )
        prefix = result.get("namespace_prefix", requested)
        attribute_filter = result.get("attribute_filter", {})
        if not isinstance(prefix, list) or not all(isinstance(s, str) for s in prefix):
            raise InvalidArgument(
                f"search filter injection policy returned namespace_prefix {_describe(prefix)}; "
                "expected a list of strings"
            )
        if not isinstance(attribute_filter, dict):
            raise InvalidArgument(
                f"search filter injection policy returned attribute_filter {_describe(attribute_filter)}; "
                "expected an object"
            )
        return prefix, attribute_filter

    def violations(
        self,
        namespace: Sequence[str],
        key: str,
        value: Any,
        attributes: Mapping[str, Any] | None,
        context: dict,
    ) -> list[dict[str, str]]:
        """The governance policy's violations for a write, `[]` when it has none or is undefined.
        Any error refuses the write (fail closed)."""
        inp = {
            "namespace": list(namespace),
            "key": key,
            "value": value,
            "attributes": None if attributes is None else dict(attributes),
            "context": context,
        }
        result = self._eval_or_raise(_GOVERNANCE, inp, "governance")
        if result is None:
            return []
        if not isinstance(result, list) or not all(_is_violation(v) for v in result):
            # Never _describe(result): a violation may quote the value it refuses.
            raise InvalidArgument(
                'governance policy must return violations as a set of {"policy": string, "message": string}')
        return [{"policy": v["policy"], "message": v["message"]} for v in result]

    def _eval(self, rule: str, inp: dict[str, Any], *, remember: bool = False) -> Any:
        # The rule's JSON value for this input, None when undefined; raises PolicyBudgetExceeded
        # or what regorus raises. `remember`: the answer may come from, and goes to, the memo.
        input_json = _input_json(inp)
        if remember and len(input_json) <= _MAX_REMEMBERED_INPUT:
            output = self._decide(rule, input_json)
        else:
            output = self._run(rule, input_json)
        return None if output == _UNDEFINED else json.loads(output)

    def _run(self, rule: str, input_json: str) -> str:
        # The rule's value as regorus's JSON text.
        if not self._sandboxed:
            return _run_here(self._digest, self._sources, rule, input_json)
        try:
            answer = policy_sandbox.run_in_worker(self._digest, self._sources, rule, input_json)
        except policy_sandbox.WorkerFailed as failed:
            if failed.reason in policy_sandbox.NOT_THE_POLICYS_FAULT:
                raise _interrupted() from None
            raise PolicyBudgetExceeded(rule, limit=failed.reason) from None
        if "engine_error" in answer:
            raise _EngineError(answer["engine_error"])
        if answer.get("over_budget"):
            raise PolicyBudgetExceeded(rule)
        return answer["output"]

    def _eval_or_raise(self, rule: str, inp: dict[str, Any], what: str, *, remember: bool = False) -> Any:
        try:
            return self._eval(rule, inp, remember=remember)
        except (PolicyBudgetExceeded, ProviderError):
            raise
        except BaseException as exc:
            if not _is_engine_error(exc):
                raise
            raise _policy_error(exc, f"{what} policy failed", at_run_time=True) from None

    def _smoke_test(self) -> None:
        for context in _SAMPLE_CONTEXTS:
            namespace = ["user", "alice", "memories"]
            decision = self._eval_or_raise(_AUTHZ, _authz_input("write", namespace, "k", context), "authz")
            if decision is not None and not isinstance(decision, bool):
                raise InvalidArgument(f"authz policy returned allow = {_describe(decision)}; expected a boolean")
            self.extract_attributes(namespace, "k", {"text": "hello"}, {"topic": "smoke"}, context)
            self.inject_search("search", ["user"], {"topic": "smoke"}, context)
            self.violations(namespace, "k", {"text": "hello"}, {"topic": "smoke"}, context)


def compile_bundle(policies: dict[str, str], version: str | None = None, *, stored: bool = False) -> CompiledPolicies:
    """Validate and compile a bundle (file name -> Rego source); InvalidArgument on any problem.

    Without `version`, the built-in sources are "builtin" and anything else is named by the
    first 16 hex digits of the sha256 of its sources. The built-in bundle is compiled and
    evaluated in this process; any other in `policy_sandbox`'s workers, with deadlines.
    `stored`: a tenant's bundle as stored, which may be larger than `MAX_BUNDLE_BYTES` (uploaded
    when files were limited one by one); it keeps working while it compiles within the deadline.
    """
    _check_sources(policies, stored=stored)
    if dict(policies) == default_bundle():
        return compile_here(policies, version)
    try:
        answer = policy_sandbox.compile_in_worker(policies, version, stored=stored)
    except policy_sandbox.WorkerFailed as failed:
        if failed.reason in policy_sandbox.NOT_THE_POLICYS_FAULT:
            raise _interrupted() from None
        why = (f"it did not compile within {policy_sandbox.COMPILE_DEADLINE_S:g} s" if failed.reason == "deadline"
               else "compiling it took more memory or stack than a bundle may")
        raise InvalidArgument(f"the policy bundle was refused: {why}") from None
    if "invalid" in answer:
        refused = answer["invalid"]
        if answer["over_budget"]:
            raise PolicyBudgetExceeded(refused["details"]["rule"])
        raise InvalidArgument(refused["message"], details=refused["details"])
    return CompiledPolicies(PolicyBundle(version=answer["version"], policies=answer["sources"]),
                            answer["digest"], sandboxed=True)


def compile_here(policies: dict[str, str], version: str | None, *, stored: bool = False) -> CompiledPolicies:
    """compile_bundle in this process."""
    _check_sources(policies, stored=stored)
    sources = dict(policies)
    engine = _build_engine(sources)  # the compiler's messages name the file
    packages, modules = set(engine.get_packages()), json.loads(engine.get_ast_as_json())
    del engine
    _refuse_recursion(modules)
    missing = [p for p in _REQUIRED_PACKAGES if f"data.{p}" not in packages]
    if missing:
        raise InvalidArgument(
            f"policy bundle is missing package {', '.join(missing)}",
            details={"missing_packages": missing},
        )
    if _GOVERNANCE_PACKAGE not in packages:
        if _GOVERNANCE_FILE in sources:
            raise InvalidArgument(
                f"{_GOVERNANCE_FILE} must hold package memories.governance: a bundle without that package gets "
                f"the built-in {_GOVERNANCE_FILE}, so rename this file",
                details={"policy_file": _GOVERNANCE_FILE},
            )
        sources[_GOVERNANCE_FILE] = default_bundle()[_GOVERNANCE_FILE]
    digest = hashlib.sha256(json.dumps(sources, sort_keys=True).encode()).hexdigest()
    if version is None:
        version = BUILTIN_VERSION if sources == default_bundle() else digest[:16]

    _thread_engine(digest, sources)  # the Rego VM's compiler may refuse what the interpreter takes
    compiled = CompiledPolicies(PolicyBundle(version=version, policies=sources), digest)
    compiled._smoke_test()
    return compiled


_Node = str | tuple[str]  # `_refuse_recursion`'s graph: a rule by its name, or a prefix of rules' names


def _refuse_recursion(modules: list[dict[str, Any]]) -> None:
    """Rego forbids a rule or function that reaches itself, but regorus does not check it: both
    its interpreter and its VM recurse until the native stack overflows, which kills the process
    (every tenant's requests) before any budget counts. Refused here, from the modules' syntax
    trees: each rule's references to rules, then a depth-first search. O(size of the trees + the
    references between rules).

    A name a rule mentions is taken for the rule of that name in its package, so a local variable
    of the same name makes the check stricter than Rego; a reference through a computed index
    (`data[x]`) reaches every rule under its literal prefix."""
    defined: dict[str, str] = {}  # "data.<package>.<rule>" -> its file
    mentions: dict[str, set[str]] = {}
    for module in modules:
        tree = module["ast"]
        package = ".".join(["data", *(_ref_path(tree["package"]["refr"]) or [])])
        aliases = _imported(module)
        for rule in tree["rules"]:
            ((kind, spec),) = rule.items()
            head = spec if kind == "Default" else next(iter(spec["head"].values()))
            name = ".".join([package, *(_ref_path(head["refr"]) or [])])
            defined.setdefault(name, module["source"]["file"])
            found = mentions.setdefault(name, set())
            parts = [{k: v for k, v in head.items() if k != "refr"}, *([] if kind == "Default" else [spec["bodies"]])]
            for path in _ref_paths(parts):
                path = [*aliases[path[0]], *path[1:]] if path[0] in aliases else path
                found.add(".".join(path) if path[0] == "data" else ".".join([package, *path]))
    # A reference to a package, or to `data`, reaches every rule under it: through one node per
    # prefix of the rules' names (a 1-tuple; a rule is its name), each leading to the prefixes one
    # name longer and to the rule it names, so a rule's edges grow with its references, not with
    # the rules they reach (edges to each rule would be rules x rules).
    edges: dict[_Node, set[_Node]] = {}
    for name in defined:
        segments = name.split(".")
        prefixes = [(".".join(segments[:end]),) for end in range(1, len(segments) + 1)]
        for shorter, longer in zip(prefixes, prefixes[1:]):
            edges.setdefault(shorter, set()).add(longer)
        edges.setdefault(prefixes[-1], set()).add(name)
    for name, refs in mentions.items():
        edges[name] = {target for ref in refs for target in _reached(ref, defined, edges)}
    state: dict[_Node, int] = {}  # 1: on the current path, 2: done
    for root in mentions:
        stack = [(root, iter(edges[root]))]
        state.setdefault(root, 1)
        if state[root] == 2:
            continue
        while stack:
            node, targets = stack[-1]
            target = next(targets, None)
            if target is None:
                state[node] = 2
                stack.pop()
            elif state.get(target) == 1:
                # The path from `target` up the stack is a cycle, and holds a rule: a prefix leads
                # only to longer prefixes and rules. Named: `target`, or the last rule before it closes.
                rule = target if isinstance(target, str) else next(n for n, _ in reversed(stack) if isinstance(n, str))
                raise InvalidArgument(
                    f"policy {defined[rule]}: {rule} reaches itself (recursion), which Rego does not allow",
                    details={"policy_file": defined[rule], "rule": rule})
            elif target not in state:
                state[target] = 1
                stack.append((target, iter(edges.get(target, ()))))


def _imported(module: dict[str, Any]) -> dict[str, list[str]]:
    """The names a module's `import data...` statements give (`as x`, or the path's last name)."""
    source = module["source"]["contents"].encode("utf-8", "surrogatepass")  # spans count bytes
    aliases: dict[str, list[str]] = {}
    for imported in module["ast"].get("imports", []):
        path = _ref_path(imported["refr"])
        if path and path[0] == "data":
            alias = imported.get("as")
            name = source[alias["start"]:alias["end"]].decode("utf-8", "surrogatepass") if alias else path[-1]
            aliases[name] = path
    return aliases


def _reached(ref: str, defined: Mapping[str, str], edges: Mapping[_Node, set[_Node]]) -> list[_Node]:
    """What a reference may evaluate: a rule it names or reaches into (`data.p.r.field`), and the
    prefix node of the rules under the name it gives, if any (`_refuse_recursion`)."""
    segments = ref.split(".")
    named: list[_Node] = [".".join(segments[:end]) for end in range(2, len(segments) + 1)]
    return [name for name in named if name in defined] + [prefix for prefix in [(ref,)] if prefix in edges]


def _ref_path(node: Any) -> list[str] | None:
    """A reference's names (`data.memories.authz.allow` -> its four), as far as they are literal
    (`data.p[x].r` -> `data.p`); None for what is not a reference. Iterative: a chain may be long."""
    names: list[str] = []  # from the outermost in
    while isinstance(node, dict) and len(node) == 1:
        ((kind, ref),) = node.items()
        if kind == "Var":
            return [ref["value"], *reversed(names)]
        if kind == "RefDot":
            names.append(ref["field"][1])
        elif kind == "RefBrack":
            index = ref["index"]
            if isinstance(index, dict) and "String" in index:
                names.append(index["String"]["value"])
            else:
                names.clear()  # what follows a computed index is not literal
        else:
            return None
        node = ref["refr"]
    return None


def _ref_paths(tree: Any) -> Iterator[list[str]]:
    """Every reference in a syntax tree, as its names (the longest literal prefix)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            path = _ref_path(node)
            if path is None:
                stack.extend(node.values())
                continue
            yield path
            while "Var" not in node:  # an index along the chain may itself mention rules
                ((kind, ref),) = node.items()
                if kind == "RefBrack":
                    stack.append(ref["index"])
                node = ref["refr"]


def _check_sources(policies: Any, *, stored: bool = False) -> None:
    if not isinstance(policies, Mapping) or not policies:
        raise InvalidArgument("a policy bundle must be a non-empty object of file name -> Rego source")
    if len(policies) > MAX_FILES:
        raise InvalidArgument(f"a policy bundle holds at most {MAX_FILES} files, got {len(policies)}")
    size = 0
    for name, source in policies.items():
        if not isinstance(name, str) or not _FILE_NAME.fullmatch(name):
            shown = echoed(str(name), 100)
            raise InvalidArgument(
                f"invalid policy file name {shown!r}: expected letters, digits, '.', '_' or '-' ending in .rego",
                details={"policy_file": shown},
            )
        if not isinstance(source, str):
            raise InvalidArgument(f"policy {name} must be a string of Rego source", details={"policy_file": name})
        size += len(source.encode("utf-8", "surrogatepass"))
        if size > MAX_BUNDLE_BYTES and not stored:
            raise InvalidArgument(f"a policy bundle's files hold at most {MAX_BUNDLE_BYTES} bytes together",
                                  details={"policy_file": name, "max_bytes": MAX_BUNDLE_BYTES})


def _build_engine(sources: Mapping[str, str]) -> regorus.Engine:
    engine = regorus.Engine()
    for name, source in sources.items():
        try:
            engine.add_policy(name, source)
        except BaseException as exc:
            if not _is_engine_error(exc):
                raise
            error = _policy_error(exc, "the policy bundle is not valid Rego", file=name)
            break
    else:
        return engine
    # Raise only once the engine is gone: a traceback keeps this frame alive, and the garbage
    # collector may free it on another thread, where dropping an engine panics.
    del engine
    raise error


def _build_meters(sources: Mapping[str, str]) -> dict[str, Any]:
    """A Rego VM per entrypoint, to count instructions; None for a rule the bundle does not define."""
    meters: dict[str, Any] = {}
    for rule in (_AUTHZ, _ATTRIBUTES, _SEARCH, _GOVERNANCE):
        try:
            meters[rule] = _build_meter(sources, rule)
        except BaseException as exc:
            if not _is_engine_error(exc):
                raise
            error = _policy_error(exc, "the Rego VM that meters evaluations cannot compile this bundle")
            break
    else:
        return meters
    del meters  # as in _build_engine: drop the VMs on this thread before raising
    raise error


def _build_meter(sources: Mapping[str, str], rule: str) -> Any:
    try:
        program = regorus_vm.Program.compile_from_modules("{}", list(sources.items()), [rule])
    except RuntimeError as exc:
        if any(m in str(exc) for m in _NO_DEFINITION):
            return None
        raise
    vm = regorus_vm.Rvm()
    vm.load_program(program)
    return vm


def _run_here(digest: str, sources: Mapping[str, str], rule: str, input_json: str) -> str:
    """The rule's value as regorus's JSON text: metered on the Rego VM, answered by the interpreter."""
    engine, meters = _thread_engine(digest, sources)
    meter = meters[rule]
    over_budget = False
    try:
        if meter is not None:  # None: the rule has no definitions, so it is undefined at no cost
            meter.set_input_json(input_json)
            try:
                meter.execute_entry_point(rule)
            except BaseException as exc:
                if _OVER_BUDGET not in str(exc):
                    raise
                over_budget = True
        if not over_budget:
            engine.set_input_json(input_json)
            output = engine.eval_rule_as_json(rule)
    except BaseException:
        _forget_thread_engine(digest)  # never reuse an engine that failed mid-evaluation
        del engine, meters, meter  # the traceback must not keep them alive (see _build_engine)
        raise
    if over_budget:
        raise PolicyBudgetExceeded(rule)
    return output


def run_here_as_answer(digest: str, sources: Mapping[str, str], rule: str, input_json: str) -> dict[str, Any]:
    """`_run_here` as a worker's answer (policy_sandbox): its output, or how it failed."""
    try:
        return {"output": _run_here(digest, sources, rule, input_json)}
    except PolicyBudgetExceeded:
        return {"over_budget": True}
    except BaseException as exc:
        if not _is_engine_error(exc):
            raise
        return {"engine_error": str(exc)}


_local = threading.local()  # module-level, so each thread's engines are dropped by that thread


def _thread_engine(digest: str, sources: Mapping[str, str]) -> tuple[regorus.Engine, dict[str, Any]]:
    engines: dict[str, tuple[regorus.Engine, dict[str, Any]]] | None = getattr(_local, "engines", None)
    if engines is None:
        engines = _local.engines = {}
    entry = engines.pop(digest, None)
    if entry is None:
        entry = (_build_engine(sources), _build_meters(sources))
        while len(engines) >= ENGINES_PER_THREAD:
            del engines[next(iter(engines))]  # least recently used
    engines[digest] = entry
    return entry


def engines_on_this_thread() -> int:
    """How many compiled bundles this thread keeps (at most `ENGINES_PER_THREAD`)."""
    return len(getattr(_local, "engines", {}))


def has_thread_engine(digest: str) -> bool:
    """Whether this thread keeps the engines of the bundle `digest` (`policy_sandbox`'s worker)."""
    return digest in getattr(_local, "engines", {})


def build_thread_engine(digest: str, sources: Mapping[str, str]) -> None:
    """Build and keep this thread's engines of the bundle, as its first evaluation would."""
    _thread_engine(digest, sources)


def _forget_thread_engine(digest: str) -> None:
    getattr(_local, "engines", {}).pop(digest, None)


def _authz_input(operation: str, namespace: Sequence[str], key: str | None, context: dict) -> dict[str, Any]:
    return {"operation": operation, "namespace": list(namespace), "key": key, "context": context}


def _is_engine_error(exc: BaseException) -> bool:
    # A Rust panic surfaces as pyo3_runtime.PanicException, which derives from BaseException.
    return isinstance(exc, Exception) or type(exc).__name__ == "PanicException"


def _input_json(inp: dict[str, Any]) -> str:
    """`inp` as JSON regorus can always read and serialize: a number larger in magnitude than
    1e308 (the top of a double's range, a longer integer) is handed over as +-1e308, which keeps
    its sign and its order against every other number. Numbers hold no credential text, so the
    governance search loses nothing. Linear in the input; no recursion, so no depth limit. Almost
    every input has no such number: two scans of its JSON text (in C) say so, and it is used as is."""
    text = json.dumps(inp)
    if "e+308" not in text and _HUGE_INTEGER not in text.translate(_DIGITS_AS_ZERO):
        return text
    root = [inp]
    stack: list[tuple[Any, Any, Any]] = [(root, 0, inp)]
    while stack:
        parent, slot, node = stack.pop()
        if isinstance(node, dict):
            parent[slot] = copy = dict(node)
            stack.extend((copy, k, v) for k, v in node.items())
        elif isinstance(node, (list, tuple)):
            parent[slot] = copy = list(node)
            stack.extend((copy, i, v) for i, v in enumerate(node))
        elif isinstance(node, (int, float)) and not isinstance(node, bool) and abs(node) > _MAX_MAGNITUDE:
            parent[slot] = _MAX_MAGNITUDE if node > 0 else -_MAX_MAGNITUDE
    return json.dumps(root[0])


def _policy_error(exc: BaseException, failed: str, *, file: str | None = None,
                  at_run_time: bool = False) -> InvalidArgument:
    """`failed`, then where (file, line, column) and why in our words: never regorus's text,
    which quotes the policy source and, at run time, the input it failed on."""
    text = str(exc)
    found = _LOCATION.search(text)
    details: dict[str, Any] = {}
    if found:
        details = {"policy_file": found[1], "line": int(found[2]), "column": int(found[3])}
    elif file:
        details = {"policy_file": file}
    said = _REASON.search(text)
    said_text = (said[1] if said else text.partition("\n")[0]).lower()
    reason = next((ours for theirs, ours in _REASONS if theirs.lower() in said_text),
                  "an error in evaluation" if at_run_time else "Rego this engine cannot compile")
    where = (f", in {details['policy_file']}" if details else "") + (
        f" at line {details['line']}, column {details['column']}" if found else "")
    # At run time regorus's text may quote the input (a memory's value): only ours is logged then.
    log.warning("%s: %s", failed, f"{reason}{where}" if at_run_time else text.split("Stack backtrace:")[0].strip())
    return InvalidArgument(f"{failed}: {reason}{where}", details=details)


def _is_attribute_value(value: Any) -> bool:
    scalar = (str, int, float, bool)
    return isinstance(value, scalar) or (isinstance(value, list) and all(isinstance(v, scalar) for v in value))


def _is_violation(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("policy"), str)
            and isinstance(value.get("message"), str))


def _describe(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."
