package main

// The sequential specification of the hash table's operations on one key
// (apps/hashtable/hash_table.h): insert is an upsert, update and delete of
// an absent key return not-found and change nothing, search returns the
// value or not-found. An operation without a response changes the state as
// it would have, whatever it returned.

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// kvState is one key's state: absent, or present with a value.
type kvState struct {
	present bool
	value   string
}

func step(state, input, output interface{}) (bool, interface{}) {
	s := state.(kvState)
	in := input.(kvInput)
	out := output.(kvOutput)
	switch in.kind {
	case "search":
		if out.unknown {
			return true, s
		}
		if out.notFound {
			return !s.present, s
		}
		return s.present && s.value == out.value, s
	case "insert":
		return !out.notFound, kvState{true, in.value}
	case "update":
		if !s.present {
			return out.unknown || out.notFound, s
		}
		return !out.notFound, kvState{true, in.value}
	case "delete":
		if !s.present {
			return out.unknown || out.notFound, s
		}
		return !out.notFound, kvState{}
	}
	return false, s
}

func describeOperation(input, output interface{}) string {
	in := input.(kvInput)
	out := output.(kvOutput)
	var result string
	switch {
	case out.unknown:
		result = "no response"
	case out.notFound:
		result = "not-found"
	case in.kind == "search":
		result = fmt.Sprintf("%q", out.value)
	default:
		result = "ok"
	}
	if in.kind == "insert" || in.kind == "update" {
		return fmt.Sprintf("%s(%q) -> %s", in.kind, in.value, result)
	}
	return fmt.Sprintf("%s() -> %s", in.kind, result)
}

func describeState(state interface{}) string {
	s := state.(kvState)
	if !s.present {
		return "absent"
	}
	return fmt.Sprintf("%q", s.value)
}

func describeMetadata(info interface{}) string {
	if m, ok := info.(opMeta); ok {
		return fmt.Sprintf("client %s, operation %d", m.client, m.seq)
	}
	return ""
}

// keyModel checks the history of one key (the caller partitions by key, to
// name the key that is not linearizable).
var keyModel = porcupine.Model{
	Init:                      func() interface{} { return kvState{} },
	Step:                      step,
	DescribeOperation:         describeOperation,
	DescribeState:             describeState,
	DescribeOperationMetadata: describeMetadata,
}
