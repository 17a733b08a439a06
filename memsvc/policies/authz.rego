# Access control: may this caller do `operation` on `namespace` (and `key`)?
# Default: a user owns ["user", <user_id>, ...]; members share ["project", P, ...], ["team", T, ...]
# and ["org", O, ...]; everyone reads ["company", ...]; roles admin and service reach the whole tenant.
# The tenant wall is not decided here: the service never shows a policy another tenant's data.
package memories.authz

default allow := false

privileged if "admin" in input.context.roles

privileged if "service" in input.context.roles

user_operations := {"read", "write", "delete", "search", "list", "events"}

read_operations := {"read", "search", "list", "events"}

# The JWT claim that lists a shared layer's members' ids. memsvc.api.identity turns each claim
# into a list, whatever form the token had ("[a b]", a list, or one plain id).
member_claims := {"project": "projects", "team": "teams", "org": "orgs"}

# Admins and services may do everything, including the `admin` operation and the empty namespace.
allow if privileged

# Users may work inside their own subtree ["user", <user_id>, ...], never on `admin`.
allow if {
	input.operation in user_operations
	count(input.namespace) >= 2
	input.namespace[0] == "user"
	is_string(input.context.user_id)
	input.context.user_id != ""
	input.namespace[1] == input.context.user_id
}

# Users may work inside ["project", P, ...], ["team", T, ...] and ["org", O, ...] when P, T or O
# is one of the ids in their `projects`, `teams` or `orgs` claim.
allow if {
	input.operation in user_operations
	count(input.namespace) >= 2
	ids := object.get(input.context.jwt_claims, member_claims[input.namespace[0]], [])
	is_array(ids)
	input.namespace[1] in ids
}

# Everyone in the tenant reads the company layer ["company", ...]; only admin and service write it.
allow if {
	input.operation in read_operations
	input.namespace[0] == "company"
}
