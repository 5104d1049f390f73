package strictjson

import "strings"

// Suggest returns the field among known that the unknown member name
// probably meant, or "" when none is close. In order:
//
//   - the same name written another way: case, '_', '-' and '.' aside
//     ("sessionId", "session-id" for "session_id");
//   - a known other name for it ("cmd" for "command", "old_str" for
//     "old", "dir" for "cwd"), listed in aliases;
//   - the closest by edit distance (a typo: "comand" for "command"),
//     within a bound that grows with the length of the name, so a short
//     name is not "corrected" into an unrelated one.
//
// Ties go to the field listed first.
func Suggest(name string, known []string) string {
	n := normalize(name)
	if n == "" {
		return ""
	}
	for _, k := range known {
		if normalize(k) == n {
			return k
		}
	}
	for _, want := range aliases[n] {
		for _, k := range known {
			if normalize(k) == want {
				return k
			}
		}
	}
	best, bestDist := "", maxDistance(len(n))+1
	for _, k := range known {
		if d := distance(n, normalize(k)); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// maxDistance is how many edits a name of n letters may be from the field
// it is taken for.
func maxDistance(n int) int {
	switch {
	case n <= 2:
		return 0
	case n <= 4:
		return 1
	case n <= 8:
		return 2
	default:
		return 3
	}
}

// normalize lower-cases name and drops the separators people disagree on.
func normalize(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_' || c == '-' || c == '.' || c == ' ':
			continue
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	return b.String()
}

// aliases maps a normalized name someone may send to the normalized
// fields it stands for in tether's payloads. An alias is offered only
// when the object has that field.
var aliases = map[string][]string{
	"cmd":              {"command"},
	"cmdline":          {"command"},
	"commandline":      {"command"},
	"script":           {"command"},
	"dir":              {"cwd", "path"},
	"directory":        {"cwd", "path"},
	"workdir":          {"cwd"},
	"workingdir":       {"cwd"},
	"workingdirectory": {"cwd"},
	"cd":               {"cwd"},
	"pwd":              {"cwd"},
	"argv":             {"args"},
	"arguments":        {"args"},
	"argument":         {"args"},
	"environment":      {"env"},
	"environ":          {"env"},
	"envvars":          {"env"},
	"file":             {"path"},
	"filename":         {"path"},
	"filepath":         {"path"},
	"source":           {"path"},
	"oldstr":           {"old"},
	"oldstring":        {"old"},
	"oldtext":          {"old"},
	"newstr":           {"new"},
	"newstring":        {"new"},
	"newtext":          {"new"},
	"contents":         {"content"},
	"text":             {"content"},
	"data":             {"content", "stdin"},
	"input":            {"stdin", "data"},
	"query":            {"pattern"},
	"regex":            {"pattern"},
	"regexp":           {"pattern"},
	"msg":              {"message"},
	"expr":             {"expression"},
	"lang":             {"language"},
	"sig":              {"signal"},
	"exe":              {"program"},
	"executable":       {"program"},
	"binary":           {"program"},
	"session":          {"sessionid"},
	"sid":              {"sessionid"},
	"frame":            {"frameid"},
	"thread":           {"threadid"},
	"cond":             {"condition"},
	"hitcount":         {"hitcondition"},
	"logpoint":         {"logmessage"},
	"lineno":           {"line"},
	"linenumber":       {"line"},
	"bps":              {"breakpoints"},
	"recurse":          {"recursive"},
	"branch":           {"baseref"},
	"url":              {"repo"},
	"repository":       {"repo"},
	"wait":             {"waitforworkspacems"},
	"workspace":        {"workspaceid"},
	"correlation":      {"correlationid"},
	"id":               {"correlationid", "sessionid"},
	"body":             {"payload"},
	"params":           {"payload", "args"},
	"route":            {"endpoint"},
	"method":           {"endpoint"},
	"tool":             {"endpoint"},
	"timeoutseconds":   {"timeout"},
	"timeouts":         {"timeout"},
}

// distance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of neighbours, each one
// edit. Names are short; the table is two rows.
func distance(a, b string) int {
	if a == b {
		return 0
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
