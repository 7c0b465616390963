package replica

import "time"

// KeyOf returns the stored form of token, for tests that tamper with the
// table.
func (d *Directory) KeyOf(token string) []byte {
	k := d.key(token)
	return k[:]
}

// Freeze stops the renewal loop and makes Close leave no trace, as if the
// process had stopped dead: the lease runs out on its own.
func (d *Directory) Freeze() {
	d.mu.Lock()
	d.frozen = true
	d.mu.Unlock()
	d.stopOnce.Do(func() { close(d.stop) })
	<-d.done
}

// SignHop signs a hop header as the forwarder does.
func (d *Directory) SignHop(from, to string, at time.Time, method, host, uri, token string) string {
	return d.signHop(from, to, at, method, host, uri, d.key(token))
}

// ParseHop exposes parseHop to the fuzz test.
func ParseHop(v string) error {
	_, err := parseHop(v)
	return err
}
