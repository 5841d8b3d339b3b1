package faultproxy

import (
	"strings"
	"unicode"
)

// IsUpdate is the default request filter: the statement is an UPDATE (a
// counter write in the bench) or a BATCH statement that holds one.
func IsUpdate(stmt string) bool {
	s := strings.TrimLeftFunc(stmt, unicode.IsSpace)
	if hasPrefixFold(s, "UPDATE") {
		return true
	}
	if hasPrefixFold(s, "BEGIN") {
		return containsFold(s, "UPDATE")
	}
	return false
}

// systemTable returns the system table a statement reads ("local",
// "peers" or "peers_v2"), or "" when it reads none of them. It looks for
// the qualified name only, as drivers write it.
func systemTable(stmt string) string {
	i := indexFold(stmt, "system.")
	for i >= 0 {
		rest := stmt[i+len("system."):]
		for _, t := range []string{"peers_v2", "peers", "local"} {
			if hasPrefixFold(rest, t) && (len(rest) == len(t) || !isIdent(rest[len(t)])) {
				return t
			}
		}
		j := indexFold(rest, "system.")
		if j < 0 {
			break
		}
		i += len("system.") + j
	}
	return ""
}

func isIdent(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func hasPrefixFold(s, p string) bool { return len(s) >= len(p) && strings.EqualFold(s[:len(p)], p) }

func indexFold(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}

func containsFold(s, sub string) bool { return indexFold(s, sub) >= 0 }
