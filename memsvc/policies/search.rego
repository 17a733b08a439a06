# Search filter injection: narrows search, list and events before they run.
# Admins and services keep the requested prefix. Anyone else is narrowed to ["user", <user_id>]
# when they asked for an ancestor of it ([] included); a prefix inside a shared layer
# (["project", P, ...], ["team", T, ...], ["org", O, ...]) or the company layer is kept, filtered
# on its own attributes; any other prefix is left as asked, filtered on the caller's own. Authz
# decides on the result.
package memories.search

privileged if "admin" in input.context.roles

privileged if "service" in input.context.roles

own_prefix := ["user", input.context.user_id]

own_filter := {"namespace": "user", "sub": input.context.user_id}

shared_layers := {"project", "team", "org"}

requested := input.namespace_prefix

# The requested prefix is [], ["user"] or ["user", <user_id>].
ancestor_of_own if {
	count(requested) <= 2
	array.slice(own_prefix, 0, count(requested)) == requested
}

result := {"namespace_prefix": requested, "attribute_filter": {}} if {
	privileged
} else := {"namespace_prefix": own_prefix, "attribute_filter": own_filter} if {
	ancestor_of_own
} else := {"namespace_prefix": requested, "attribute_filter": {"namespace": requested[0], "sub": requested[1]}} if {
	count(requested) >= 2
	requested[0] in shared_layers
} else := {"namespace_prefix": requested, "attribute_filter": {"namespace": "company"}} if {
	count(requested) >= 1
	requested[0] == "company"
} else := {"namespace_prefix": requested, "attribute_filter": own_filter}
