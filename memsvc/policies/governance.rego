# Governance: what a write may never store. Evaluated on every write of a value; a non-empty
# `violations` set refuses the write (422 POLICY_VIOLATION) and names the policies.
# Default: no credentials, anywhere in the namespace, key, value or attributes.
#
# The write is searched as one JSON text (json.marshal), so every string in it, object keys
# included, is searched at a fixed cost in Rego VM instructions, however large the value (`walk`
# would cost an iteration per node, and the VM that meters the evaluation budget cannot compile
# it). A pattern runs only when one of its literal markers is in the text: compiling a regex costs
# up to half a millisecond, and most writes hold no marker at all.
package memories.governance

# A credential starts after a non-word character or a JSON escape: in the JSON text a newline
# is the two characters `\n`, so "line\nAKIA..." must still count.
edge := `(^|[^A-Za-z0-9_]|\\[nrtbf]|\\u[0-9a-fA-F]{4})`

end := `([^A-Za-z0-9_]|$)`

credentials := {
	"an AWS access key id": {
		"markers": ["akia", "asia"],
		"pattern": concat("", [edge, `(AKIA|ASIA)[A-Z0-9]{16}`, end]),
	},
	"an AWS secret access key": {
		"markers": ["secret"],
		"pattern": `(?i:(aws_?)?secret_?access_?key)\\?["']?\s*[:=]\s*\\?["']?[A-Za-z0-9/+]{40}([^A-Za-z0-9/+=]|$)`,
	},
	"a private key": {
		"markers": ["private key"],
		"pattern": `-----BEGIN ([A-Z0-9]+ )*PRIVATE KEY( BLOCK)?-----`,
	},
	"a GitHub token": {
		"markers": ["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
		"pattern": concat("", [edge, `(gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{82})`, end]),
	},
	"a Slack token": {
		"markers": ["xoxb-", "xoxp-"],
		"pattern": concat("", [edge, `xox[bp]-[0-9]{6,}-[0-9A-Za-z-]{8,}`, end]),
	},
	"a Stripe secret key": {
		"markers": ["sk_live_", "rk_live_"],
		"pattern": concat("", [edge, `[sr]k_live_[0-9A-Za-z]{24,}`, end]),
	},
}

parts := {
	"namespace": input.namespace,
	"key": input.key,
	"value": input.value,
	"attributes": input.attributes,
}

text := json.marshal([input.namespace, input.key, input.value, input.attributes])

folded := lower(text)

found contains what if {
	some what, credential in credentials
	some marker in credential.markers
	contains(folded, marker)
	regex.match(credential.pattern, text)
}

# The message names where and what, never the text that matched.
violations contains {
	"policy": "no_credentials",
	"message": sprintf("%s holds %s: store where the secret is kept, never the secret itself", [part, what]),
} if {
	some what in found
	some part, content in parts
	regex.match(credentials[what].pattern, json.marshal(content))
}
