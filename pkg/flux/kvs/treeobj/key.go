package treeobj

import "strings"

// Root is the key of a namespace's root directory.
const Root = "."

// NormalizeKey returns key in the canonical form the KVS uses to name it:
// leading, trailing and repeated "." separators removed, and "." for the
// root (an empty key or one made only of separators).
func NormalizeKey(key string) string {
	clean := true
	for i := 0; i < len(key); i++ {
		if key[i] == '.' && (i == 0 || i == len(key)-1 || key[i+1] == '.') {
			clean = false
			break
		}
	}
	if clean && key != "" {
		return key
	}
	parts := SplitKey(key)
	if len(parts) == 0 {
		return Root
	}
	return strings.Join(parts, ".")
}

// SplitKey returns the path components of key (none for the root).
func SplitKey(key string) []string {
	// one allocation, sized for every component (the KVS splits the key
	// of every operation of every commit)
	parts := AppendSplitKey(make([]string, 0, strings.Count(key, ".")+1), key)
	if len(parts) == 0 {
		return nil
	}
	return parts
}

// AppendSplitKey appends the components of key to parts (as SplitKey
// returns them) and returns the extended slice: the components of many
// keys can share one allocation.
func AppendSplitKey(parts []string, key string) []string {
	for key != "" {
		p := key
		if i := strings.IndexByte(key, '.'); i >= 0 {
			p, key = key[:i], key[i+1:]
		} else {
			key = ""
		}
		if p != "" {
			parts = append(parts, p)
		}
	}
	return parts
}

// JoinKey joins a directory key and a name ("." as dir yields name).
func JoinKey(dir, name string) string {
	dir = NormalizeKey(dir)
	if dir == Root {
		return name
	}
	return dir + "." + name
}
