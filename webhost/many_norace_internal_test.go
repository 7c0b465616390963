//go:build !race

package webhost

// manyIdleSessions is how many sessions TestManyIdleSessions makes.
const manyIdleSessions = 500
