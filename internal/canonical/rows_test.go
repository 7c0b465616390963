package canonical

import (
	"encoding/json"
	"strconv"
)

// rowsDigest32KB is the reference fnv1a64 of the canonical encoding of
// rowsValue(400), the cross-implementation vector.
const rowsDigest32KB = "da74a5d8484478ee"

// rowsValue returns the decoded cross-implementation test value
// {"rows":[…n rows…]}, row i being {"id":"device_<i>","name":"Device <i>",
// "status": i odd ? "online" : "offline","tags":["a","b","c"]}. With n = 400
// its canonical encoding is about 32 kB.
func rowsValue(n int) map[string]any {
	rows := make([]any, n)
	for i := range rows {
		status := "offline"
		if i%2 == 1 {
			status = "online"
		}
		rows[i] = map[string]any{
			"id":     "device_" + strconv.Itoa(i),
			"name":   "Device " + strconv.Itoa(i),
			"status": status,
			"tags":   []any{"a", "b", "c"},
		}
	}
	return map[string]any{"rows": rows}
}

// rowsJSON returns rowsValue(n) as JSON text, with the members of each row
// in an order that is not the canonical one, so that Canonicalize has to
// sort them.
func rowsJSON(n int) []byte {
	type row struct {
		Tags   []string `json:"tags"`
		Status string   `json:"status"`
		Name   string   `json:"name"`
		ID     string   `json:"id"`
	}
	rows := make([]row, n)
	for i := range rows {
		status := "offline"
		if i%2 == 1 {
			status = "online"
		}
		rows[i] = row{
			ID:     "device_" + strconv.Itoa(i),
			Name:   "Device " + strconv.Itoa(i),
			Status: status,
			Tags:   []string{"a", "b", "c"},
		}
	}
	b, err := json.Marshal(map[string]any{"rows": rows})
	if err != nil {
		panic(err)
	}
	return b
}
