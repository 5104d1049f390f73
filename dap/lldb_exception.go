//go:build !windows

package dap

import (
	"context"
	"regexp"
	"strconv"
	"strings"
)

// A C++ throw stop from lldb-dap 19 says only "C++ Throw": the thrown
// type and its what() are read here, at __cxa_throw(void *obj, type_info
// *tinfo, …), through lldb's generic argument registers ($arg1, $arg2):
// the type_info's name (its second word, mangled) and, for a type of the
// standard library (which all derive from std::exception), what() called
// through the vtable. A user type's what() is not called: nothing says it
// has one, and a wrong guess would run garbage in the debuggee.

var _ exceptionDescriber = lldbDAP{}

// Expressions at __cxa_throw, 64-bit Itanium ABI.
const (
	cxxThrownTypeExpr = `*(const char**)((char*)$arg2 + 8)`
	cxxWhatExpr       = `((const char*(*)(void*))(*(void***)$arg1)[2])((void*)$arg1)`
)

var quotedResult = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"\s*$`)

func (lldbDAP) describeException(ctx context.Context, s *Session, c *Client, st *StopInfo, ex *ExceptionInfo) {
	if ex.Type != "cpp_throw" && !strings.Contains(st.Description, "C++ Throw") {
		return
	}
	frames, err := s.frames(ctx, c, st.ThreadID, 1)
	if err != nil || len(frames) == 0 || !strings.Contains(frames[0].Name, "__cxa_throw") {
		return
	}
	typ := quoted(s.evaluate(ctx, c, cxxThrownTypeExpr, frames[0].ID, "watch"))
	if typ == "" {
		return
	}
	ex.Type = demangleType(typ)
	if strings.HasPrefix(ex.Type, "std::") {
		if what := quoted(s.evaluate(ctx, c, cxxWhatExpr, frames[0].ID, "watch")); what != "" {
			ex.Message = what
		}
	}
}

// quoted is the string an lldb result shows in quotes (`0x… "text"`), or "".
func quoted(r EvalResult) string {
	if r.Error != "" {
		return ""
	}
	m := quotedResult.FindStringSubmatch(r.Result)
	if m == nil {
		return ""
	}
	if u, err := strconv.Unquote(`"` + m[1] + `"`); err == nil {
		return u
	}
	return m[1]
}

// demangleType turns the common Itanium type names into C++ (St13runtime_error
// → std::runtime_error, N2ns5ErrorE → ns::Error, 7MyError → MyError);
// anything else is returned as it is.
func demangleType(m string) string {
	s := m
	nested := strings.HasPrefix(s, "N")
	if nested {
		if !strings.HasSuffix(s, "E") {
			return m
		}
		s = s[1 : len(s)-1]
	}
	var parts []string
	if strings.HasPrefix(s, "St") {
		parts = append(parts, "std")
		s = s[2:]
	}
	for s != "" {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		n, err := strconv.Atoi(s[:i])
		if i == 0 || err != nil || n <= 0 || i+n > len(s) {
			return m
		}
		parts = append(parts, s[i:i+n])
		s = s[i+n:]
		if !nested && s != "" {
			return m
		}
	}
	if len(parts) == 0 || (len(parts) == 1 && parts[0] == "std") {
		return m
	}
	return strings.Join(parts, "::")
}
