"""The AWS session store: session rows in the item table (docs/aws-design.md, "Sessions").

- A session: `pk = T#<tenant>#SESS#<user>`, `sk = <session id>` (both percent-encoded like
  namespace segments), `rt = session`. It also carries the `by_recent` index's keys, `gpk = pk`
  and `gsk = <last_interaction µs, 20 digits>#<session id>`, so "my sessions by last interaction"
  is one `Query` of the user's own index partition, newest first. A busy tenant spreads over one
  partition per user; one user's traffic stays in that user's partition.
- An append is one `TransactWriteItems`: the session row's `Update` (seq + 1, last_interaction,
  conditioned on the seq read) and the message item's `Put` (the item store's row and
  condition, so its stream record reaches the indexer and the timeline). Either both are
  written or neither; racing appends lose the condition and retry on the next seq.
- Auto-delete: a closed session due for deletion has a marker `pk = SESSDUE#<0..7>`, `sk = <due
  µs>#<tenant>#<user>#<session>` (sharded by a hash of the session so no partition is hot), written
  with the close; the retention job queries the shards up to now.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import datetime
from typing import Any

from boto3.dynamodb.types import Binary
from botocore.exceptions import BotoCoreError, ClientError

from memsvc.adapters.aws.dynamo_store import DynamoItemStore, call_table
from memsvc.adapters.aws.errors import error_code, lost_race
from memsvc.core.contention import WRITE_ATTEMPTS, backoff
from memsvc.core.errors import Conflict, StoreUnavailable, Taken
from memsvc.core.models import StoredItem, from_epoch_us, to_epoch_us
from memsvc.core.namespaces import decode_namespace, encode_namespace
from memsvc.core.sessions import SessionRecord, message_key, messages_namespace, session_closed

__all__ = ["DynamoSessionStore", "DUE_SHARDS"]

DUE_SHARDS = 8
_GSI_RECENT = "by_recent"


class DynamoSessionStore:
    def __init__(self, client: Any, table_name: str, items: DynamoItemStore) -> None:
        self._db = client
        self._table = table_name
        self._items = items

    def create(self, record: SessionRecord) -> None:
        # The user's row in the tenant's users-with-sessions listing first (idempotent): a session
        # is never without it, and one left by a refused create only lists a user with no session.
        self._call("PutItem", Item={**_users_key(record.tenant, record.user_id), "rt": {"S": "session-user"},
                                    "user_id": {"S": record.user_id}})
        try:
            self._db.put_item(TableName=self._table, Item=_row(record), ConditionExpression="attribute_not_exists(pk)")
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                raise Taken("a session with this id exists", details={"session_id": record.session_id}) from None
            raise StoreUnavailable(f"DynamoDB PutItem failed ({error_code(exc)})") from None
        except BotoCoreError as exc:
            raise StoreUnavailable(f"DynamoDB PutItem failed ({error_code(exc)})") from None

    def get(self, tenant, user_id, session_id):
        row = self._call("GetItem", Key=_key(tenant, user_id, session_id), ConsistentRead=True)
        return _record(row["Item"]) if "Item" in row else None

    def update(self, record: SessionRecord, *, expected_version: int) -> None:
        names = {"#ver": "ver", "#uat": "uat", "#li": "li", "#gsk": "gsk", "#sealed": "sealed", "#aid": "aid",
                 "#cls": "cls", "#dla": "dla", "#ext": "ext"}
        values: dict[str, Any] = {
            ":expected": {"N": str(expected_version)}, ":ver": {"N": str(record.version)},
            ":uat": {"N": str(to_epoch_us(record.updated_at))}, ":li": {"N": str(to_epoch_us(record.last_interaction))},
            ":gsk": {"S": _gsk(record.last_interaction, record.session_id)}, ":sealed": {"B": record.sealed},
            ":ext": {"S": record.extract},
        }
        sets = ["#ver = :ver", "#uat = :uat", "#li = :li", "#gsk = :gsk", "#sealed = :sealed", "#ext = :ext"]
        removes = []
        for name, value in (("aid", record.agent_id), ("cls", _us(record.closed_at)), ("dla", _us(record.delete_after))):
            if value is None:
                removes.append(f"#{name}")
            else:
                sets.append(f"#{name} = :{name}")
                values[f":{name}"] = {"S": value} if isinstance(value, str) else {"N": str(value)}
        update = {
            "TableName": self._table, "Key": _key(record.tenant, record.user_id, record.session_id),
            "UpdateExpression": "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else ""),
            "ConditionExpression": "#ver = :expected", "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
        actions: list[dict[str, Any]] = [{"Update": update}]
        if record.delete_after is not None:
            actions.append({"Put": {"TableName": self._table, "Item": {**_due_key(record), "rt": {"S": "session-due"}}}})
        self._transact(actions, lost=Conflict("the session changed while this write was in flight",
                                              details={"expected_version": expected_version}))

    def claim_extraction(self, tenant: str, user_id: str, session_id: str, *, from_seq: int, now: datetime,
                         until: datetime) -> bool:
        return self._extraction_update(
            tenant, user_id, session_id, from_seq, "SET #xl = :until",
            " AND (attribute_not_exists(#xl) OR #xl < :now)",
            {":until": {"N": str(to_epoch_us(until))}, ":now": {"N": str(to_epoch_us(now))}})

    def mark_extracted(self, tenant: str, user_id: str, session_id: str, *, from_seq: int, to_seq: int) -> bool:
        return self._extraction_update(tenant, user_id, session_id, from_seq, "SET #xs = :to REMOVE #xl", "",
                                       {":to": {"N": str(to_seq)}})

    def _extraction_update(self, tenant: str, user_id: str, session_id: str, from_seq: int, update: str,
                           condition: str, values: dict[str, Any]) -> bool:
        """An UpdateItem of the extraction fields, if `extracted_seq` is still `from_seq` (a session
        from before extraction has none: 0); False when that condition fails."""
        at = "#xs = :from" if from_seq else "(attribute_not_exists(#xs) OR #xs = :from)"
        try:
            self._db.update_item(
                TableName=self._table, Key=_key(tenant, user_id, session_id), UpdateExpression=update,
                ConditionExpression=f"attribute_exists(pk) AND {at}{condition}",
                ExpressionAttributeNames={"#xs": "xseq", "#xl": "xlease"},
                ExpressionAttributeValues={":from": {"N": str(from_seq)}, **values})
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise StoreUnavailable(f"DynamoDB UpdateItem failed ({error_code(exc)})") from None
        except BotoCoreError as exc:
            raise StoreUnavailable(f"DynamoDB UpdateItem failed ({error_code(exc)})") from None
        return True

    def list(self, tenant, user_id, *, agent_id, limit, after):
        kwargs: dict[str, Any] = {
            "IndexName": _GSI_RECENT, "KeyConditionExpression": "gpk = :g", "ScanIndexForward": False,
            "ExpressionAttributeValues": {":g": {"S": _pk(tenant, user_id)}},
        }
        if agent_id is not None:
            kwargs["FilterExpression"] = "aid = :a"
            kwargs["ExpressionAttributeValues"][":a"] = {"S": agent_id}
        if after is not None:
            kwargs["KeyConditionExpression"] += " AND gsk < :after"
            kwargs["ExpressionAttributeValues"][":after"] = {"S": _gsk(after[0], after[1])}
        out: list[SessionRecord] = []
        while len(out) < limit:
            kwargs["Limit"] = limit - len(out)
            page = self._call("Query", **kwargs)
            out.extend(_record(row) for row in page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return out

    def users_after(self, tenant: str, after: str | None, limit: int) -> list[str]:
        """A `Query` of the tenant's users-with-sessions listing, by encoded user id."""
        kwargs: dict[str, Any] = {"KeyConditionExpression": "pk = :p", "ConsistentRead": True,
                                  "ExpressionAttributeValues": {":p": {"S": _users_pk(tenant)}}}
        if after is not None:
            kwargs["ExclusiveStartKey"] = _users_key(tenant, after)
        out: list[str] = []
        while len(out) < limit:
            kwargs["Limit"] = limit - len(out)
            page = self._call("Query", **kwargs)
            out += [row["user_id"]["S"] for row in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return out

    def delete(self, tenant: str, user_id: str, session_id: str) -> None:
        record = self.get(tenant, user_id, session_id)
        if record is None:
            return
        actions: list[dict[str, Any]] = [{"Delete": {"TableName": self._table, "Key": _key(tenant, user_id, session_id)}}]
        if record.delete_after is not None:
            actions.append({"Delete": {"TableName": self._table, "Key": _due_key(record)}})
        self._transact(actions, lost=Conflict("the session changed while it was deleted; retry"))

    def append(self, tenant: str, user_id: str, session_id: str, at: datetime,
               message: Callable[[int, StoredItem | None], StoredItem]) -> StoredItem | None:
        ns = messages_namespace(user_id, session_id)
        for attempt in range(WRITE_ATTEMPTS):
            backoff(attempt)
            record = self.get(tenant, user_id, session_id)
            if record is None:
                return None
            if record.closed_at is not None:
                raise session_closed(session_id)
            seq = record.seq + 1
            # A key can hold the tombstone of a message of a deleted session of the same id.
            old = self._items.get(tenant, ns, message_key(seq))
            item = message(seq, old)
            self._items.register_namespace(tenant, ns)
            counter = {"Update": {
                "TableName": self._table, "Key": _key(tenant, user_id, session_id),
                "UpdateExpression": "SET #seq = :next, #li = :li, #gsk = :gsk",
                "ConditionExpression": "#seq = :seq AND attribute_not_exists(#cls)",  # closing ends appends
                "ExpressionAttributeNames": {"#seq": "seq", "#li": "li", "#gsk": "gsk", "#cls": "cls"},
                "ExpressionAttributeValues": {":next": {"N": str(seq)}, ":seq": {"N": str(record.seq)},
                                              ":li": {"N": str(to_epoch_us(at))}, ":gsk": {"S": _gsk(at, session_id)}},
            }}
            try:
                self._transact([counter, self._items.put_action(item, kind="add", old=old)], lost=Conflict("lost"))
            except Conflict:
                continue  # another append took this seq
            return item
        raise Conflict("too many concurrent appends to this session; retry", details={"session_id": session_id})

    def messages(self, tenant, namespace, after_key, limit):
        return self._items.items_after(tenant, namespace, after_key, limit)

    def due_for_deletion(self, now: datetime, limit: int) -> list[SessionRecord]:
        due: list[SessionRecord] = []
        for shard in range(DUE_SHARDS):
            page = self._call("Query", KeyConditionExpression="pk = :p AND sk <= :now", Limit=limit,
                              ExpressionAttributeValues={":p": {"S": f"SESSDUE#{shard}"},
                                                         ":now": {"S": f"{to_epoch_us(now):020d}~"}})
            for row in page.get("Items", []):
                _, tenant, user, session = row["sk"]["S"].split("#", 3)
                record = self.get(tenant, decode_namespace(user)[0], decode_namespace(session)[0])
                if record is not None and record.delete_after is not None and record.delete_after <= now:
                    due.append(record)
                else:  # reopened or gone: the marker is stale
                    self._call("DeleteItem", Key={"pk": row["pk"], "sk": row["sk"]})
        return due[:limit]

    def _transact(self, actions: list[dict[str, Any]], *, lost: Exception) -> None:
        try:
            self._db.transact_write_items(TransactItems=actions)
        except ClientError as exc:
            if lost_race(exc):
                raise lost from None
            raise StoreUnavailable(f"the store did not take the write ({error_code(exc)}); nothing was written") from None
        except BotoCoreError as exc:
            raise StoreUnavailable(f"the store did not take the write ({error_code(exc)}); nothing was written") from None

    def _call(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        return call_table(self._db, self._table, operation, **kwargs)


def _enc(segment: str) -> str:
    return encode_namespace((segment,))


def _pk(tenant: str, user_id: str) -> str:
    return f"T#{tenant}#SESS#{_enc(user_id)}"


def _users_pk(tenant: str) -> str:
    return f"T#{tenant}#SU"


def _users_key(tenant: str, user_id: str) -> dict[str, Any]:
    """A user's row in the tenant's listing of users who have had a session (the export walks it):
    written once per session created, one row per user, removed by the user's erasure."""
    return {"pk": {"S": _users_pk(tenant)}, "sk": {"S": _enc(user_id)}}


def _key(tenant: str, user_id: str, session_id: str) -> dict[str, Any]:
    return {"pk": {"S": _pk(tenant, user_id)}, "sk": {"S": _enc(session_id)}}


def _gsk(last_interaction: datetime, session_id: str) -> str:
    return f"{to_epoch_us(last_interaction):020d}#{_enc(session_id)}"


def _due_key(record: SessionRecord) -> dict[str, Any]:
    assert record.delete_after is not None
    ident = f"{record.tenant}#{_enc(record.user_id)}#{_enc(record.session_id)}"
    shard = int(hashlib.sha256(ident.encode()).hexdigest(), 16) % DUE_SHARDS
    return {"pk": {"S": f"SESSDUE#{shard}"}, "sk": {"S": f"{to_epoch_us(record.delete_after):020d}#{ident}"}}


def _us(at: datetime | None) -> int | None:
    return to_epoch_us(at) if at is not None else None


def _row(r: SessionRecord) -> dict[str, Any]:
    row: dict[str, Any] = {
        **_key(r.tenant, r.user_id, r.session_id), "rt": {"S": "session"}, "tenant": {"S": r.tenant},
        "uid": {"S": r.user_id}, "sid": {"S": r.session_id}, "sealed": {"B": r.sealed},
        "cat": {"N": str(to_epoch_us(r.created_at))}, "uat": {"N": str(to_epoch_us(r.updated_at))},
        "li": {"N": str(to_epoch_us(r.last_interaction))}, "ver": {"N": str(r.version)}, "seq": {"N": str(r.seq)},
        "gpk": {"S": _pk(r.tenant, r.user_id)}, "gsk": {"S": _gsk(r.last_interaction, r.session_id)},
        "ext": {"S": r.extract}, "xseq": {"N": str(r.extracted_seq)},
    }
    if r.agent_id is not None:
        row["aid"] = {"S": r.agent_id}
    return row


def _record(row: dict[str, Any]) -> SessionRecord:
    sealed = row["sealed"]["B"]
    return SessionRecord(
        tenant=row["tenant"]["S"], user_id=row["uid"]["S"], session_id=row["sid"]["S"],
        agent_id=row["aid"]["S"] if "aid" in row else None,
        sealed=bytes(sealed.value) if isinstance(sealed, Binary) else bytes(sealed),
        created_at=from_epoch_us(int(row["cat"]["N"])), updated_at=from_epoch_us(int(row["uat"]["N"])),
        last_interaction=from_epoch_us(int(row["li"]["N"])), version=int(row["ver"]["N"]), seq=int(row["seq"]["N"]),
        closed_at=from_epoch_us(int(row["cls"]["N"])) if "cls" in row else None,
        delete_after=from_epoch_us(int(row["dla"]["N"])) if "dla" in row else None,
        extract=row["ext"]["S"] if "ext" in row else "off",
        extracted_seq=int(row["xseq"]["N"]) if "xseq" in row else 0,
        extract_lease_until=from_epoch_us(int(row["xlease"]["N"])) if "xlease" in row else None,
    )
