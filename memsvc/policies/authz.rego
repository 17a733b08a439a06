# Access control: may this caller do `operation` on `namespace` (and `key`)?
# Default: a user owns ["user", <user_id>, ...]; roles admin and service reach the whole tenant.
# The tenant wall is not decided here: the service never shows a policy another tenant's data.
package memories.authz

default allow := false

privileged if "admin" in input.context.roles

privileged if "service" in input.context.roles

user_operations := {"read", "write", "delete", "search", "list", "events"}

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
