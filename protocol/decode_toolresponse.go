package protocol

// DecodeToolResponse decodes the JSON object b into r as json.Unmarshal(b, r)
// would, like DecodeToolCall. Result aliases b. DecodeResponse adds the rules
// of what counts as an answer.
func DecodeToolResponse(b []byte, r *ToolResponse) error {
	saved := *r
	if !fast {
		saved.Result = cloneRaw(saved.Result)
		return plainDecode(b, r, saved)
	}
	d, err := openObject(b)
	for err == nil {
		var key []byte
		var ok bool
		if key, ok, err = d.next(); !ok || err != nil {
			break
		}
		var ferr error
		switch {
		case keyIs(key, "correlation_id"):
			ferr = d.str(&r.CorrelationID)
		case keyIs(key, "success"):
			ferr = d.boolean(&r.Success)
		case keyIs(key, "result"):
			ferr = d.raw(&r.Result)
		case keyIs(key, "error"):
			ferr = d.str(&r.Error)
		case keyIs(key, "message"):
			ferr = d.str(&r.Message)
		default:
			err = d.skip()
		}
		if ferr != nil {
			err = fieldError(key, ferr)
		}
	}
	if err == nil {
		return d.end()
	}
	if err == errSlowKey {
		saved.Result = cloneRaw(saved.Result)
		return unmarshalFrom(b, r, saved)
	}
	return err
}
