package protocol

// DecodeBusMessage decodes the JSON object b into m as json.Unmarshal(b, m)
// would, like DecodeToolCall. Payload aliases b.
func DecodeBusMessage(b []byte, m *BusMessage) error {
	saved := *m
	if !fast {
		saved.Payload = cloneRaw(saved.Payload)
		return plainDecode(b, m, saved)
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
		case keyIs(key, "type"):
			ferr = d.str(&m.Type)
		case keyIs(key, "reason"):
			ferr = d.str(&m.Reason)
		case keyIs(key, "holder"):
			ferr = d.str(&m.Holder)
		case keyIs(key, "since"):
			ferr = d.int(&m.Since)
		default:
			var known bool
			if known, ferr = d.toolCallField(key, &m.ToolCall); !known {
				err = d.skip()
			}
		}
		if ferr != nil {
			err = fieldError(key, ferr)
		}
	}
	if err == nil {
		return d.end()
	}
	if err == errSlowKey {
		saved.Payload = cloneRaw(saved.Payload)
		return unmarshalFrom(b, m, saved)
	}
	return err
}
