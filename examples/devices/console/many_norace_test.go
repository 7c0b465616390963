//go:build !race

package console

// manyIdleSessions is how many idle sessions TestManyIdleSessions holds
// (500 build in under a second; BenchmarkTenThousandIdleSessions holds 10,000).
const manyIdleSessions = 500
