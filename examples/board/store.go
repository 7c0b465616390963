package main

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/agentsurface/agentsurface/surface"
)

// Card is one card of the board.
type Card struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Column string `json:"column"`
}

var (
	columns      = []string{"todo", "doing", "done"}
	editors      = map[string]bool{"alice": true} // the others may only read
	errForbidden = errors.New("only an editor may change the board")
	errNoCard    = errors.New("there is no such card or column")
)

// Store is the board's domain service: the team's cards, in memory. It checks
// the user's authority on every change, whoever asks (an approval is no permission).
type Store struct {
	changed func() // called after every change, without the lock
	mu      sync.Mutex
	cards   []Card
}

// Cards returns the cards.
func (st *Store) Cards() []Card {
	st.mu.Lock()
	defer st.mu.Unlock()
	return slices.Clone(st.cards)
}

// Move moves card id to column, as user.
func (st *Store) Move(user, id, column string) error {
	return st.change(user, func() error {
		i := slices.IndexFunc(st.cards, func(c Card) bool { return c.ID == id })
		if i < 0 || !slices.Contains(columns, column) {
			return errNoCard
		}
		st.cards[i].Column = column
		return nil
	})
}

// Delete deletes the cards ids, as user.
func (st *Store) Delete(user string, ids []string) error {
	return st.change(user, func() error {
		st.cards = slices.DeleteFunc(st.cards, func(c Card) bool { return slices.Contains(ids, c.ID) })
		return nil
	})
}

// change runs f on the cards if user may change them.
func (st *Store) change(user string, f func() error) error {
	if !editors[user] {
		return errForbidden
	}
	st.mu.Lock()
	err := f()
	st.mu.Unlock()
	if err == nil {
		st.changed()
	}
	return err
}

// Inputs: of the procedure move, and of delete and the view action select.
type (
	moveInput struct {
		ID     string `json:"id" jsonschema:"The card to move"`
		Column string `json:"column" jsonschema:"Where to: todo, doing or done"`
	}
	cardIDs struct {
		IDs []string `json:"ids" jsonschema:"The cards' ids"`
	}
)

// executor runs the domain procedures as the calling session's user: the
// one its host context names, which the Host takes from Options.User.
func executor(st *Store) surface.ProcedureExecutor {
	x := surface.NewFuncExecutor()
	surface.AddFunc(x, "cards.move", func(_ context.Context, call *surface.ProcedureCall, in moveInput) (surface.None, error) {
		user, _ := call.Host["user"].(string)
		return surface.None{}, agentError(st.Move(user, in.ID, in.Column))
	})
	surface.AddFunc(x, "cards.delete", func(_ context.Context, call *surface.ProcedureCall, in cardIDs) (surface.None, error) {
		user, _ := call.Host["user"].(string)
		return surface.None{}, agentError(st.Delete(user, in.IDs))
	})
	return x
}

// agentError is what an agent may see of a store error.
func agentError(err error) error {
	if errors.Is(err, errForbidden) {
		return surface.NewError(surface.CodeNotAuthorized, "", map[string]any{"origin": "server"})
	} else if err != nil {
		return surface.Precondition(err.Error(), nil) // a fixed text of the store
	}
	return nil
}
