// Package replica runs agentsurface on several replicas behind a load
// balancer, with Postgres as the shared store.
package replica
