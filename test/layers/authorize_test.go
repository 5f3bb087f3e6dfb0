package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Handlers reach state only after internal/acl decided (issue 13, spec coordinator-apis §0.4):
// in every handler of the API table, walked in source order and through the Table methods it
// calls, the first thing touching group state, the topology plugin or a metadata write must come
// after an authorization decision (a check, or asking whether an authorizer is enabled at all).
// Reading the topic catalog is not state here: Kafka reads its metadata cache before checking
// topic ACLs too. This is a source-order rule, not a proof: a check inside a branch that does
// not dominate the access passes it, which review must still catch.
func TestHandlersAuthorizeBeforeState(t *testing.T) {
	dir := "../../internal/handlers"
	fset := token.NewFileSet()
	methods := map[string]*ast.FuncDecl{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil && len(fd.Recv.List) == 1 {
				if star, ok := fd.Recv.List[0].Type.(*ast.StarExpr); ok {
					if id, ok := star.X.(*ast.Ident); ok && id.Name == "Table" {
						methods[fd.Name.Name] = fd
					}
				}
			}
		}
	}
	handlers := registeredHandlers(t, dir, fset)
	if len(handlers) < 20 {
		t.Fatalf("found only %d handlers in handlers.New; the parser no longer understands the table", len(handlers))
	}
	o := &order{methods: methods, memo: map[string]event{}}
	for key, name := range handlers {
		fd := methods[name]
		if fd == nil {
			t.Errorf("API key %s: handler %s not found", key, name)
			continue
		}
		if ev := o.first(name); ev.kind == stateFirst {
			t.Errorf("API key %s: %s reaches state (%s at %s) before any authorization decision", key, name, ev.what, fset.Position(ev.pos))
		}
	}
}

// registeredHandlers maps each key registered in handlers.New (t.add(key, min, max, t.fn)) to
// the handler method's name.
func registeredHandlers(t *testing.T, dir string, fset *token.FileSet) map[string]string {
	f, err := parser.ParseFile(fset, filepath.Join(dir, "handlers.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || chain(call.Fun) != "t.add" || len(call.Args) != 4 {
			return true
		}
		key, _ := call.Args[0].(*ast.BasicLit)
		if fn := chain(call.Args[3]); key != nil && strings.HasPrefix(fn, "t.") {
			out[key.Value] = strings.TrimPrefix(fn, "t.")
		}
		return true
	})
	return out
}

type eventKind int

const (
	noEvent eventKind = iota
	authFirst
	stateFirst
)

type event struct {
	kind eventKind
	what string
	pos  token.Pos
}

type order struct {
	methods map[string]*ast.FuncDecl
	memo    map[string]event
}

// authorization decisions: the checks of internal/handlers/authz.go and the hook API 93 uses.
var decisions = map[string]bool{
	"t.authorize": true, "t.allowed": true, "t.groupAllowed": true, "t.topicAllowed": true,
	"t.clusterAllowed": true, "t.configResourceAllowed": true, "t.authorizeGroupRead": true,
}

// first is the first event of a Table method in source order.
func (o *order) first(name string) event {
	if ev, ok := o.memo[name]; ok {
		return ev
	}
	o.memo[name] = event{} // a recursive call sees nothing
	var found event
	ast.Inspect(o.methods[name].Body, func(n ast.Node) bool {
		if found.kind != noEvent {
			return false
		}
		switch x := n.(type) {
		case *ast.SelectorExpr:
			c := chain(x)
			switch {
			case decisions[c] || strings.HasPrefix(c, "t.deps.Authorizer"):
				found = event{authFirst, c, x.Pos()}
			case strings.HasPrefix(c, "t.deps.Groups") || strings.HasPrefix(c, "t.deps.Topology") ||
				strings.HasPrefix(c, "t.deps.Meta.Write") || strings.HasPrefix(c, "t.deps.CreateTopics"):
				found = event{stateFirst, c, x.Pos()}
			case strings.HasPrefix(c, "t.") && strings.Count(c, ".") == 1 && o.methods[strings.TrimPrefix(c, "t.")] != nil:
				if ev := o.first(strings.TrimPrefix(c, "t.")); ev.kind != noEvent {
					found = event{ev.kind, c + " → " + ev.what, x.Pos()}
				}
			}
			return found.kind == noEvent && !strings.HasPrefix(c, "t.")
		}
		return true
	})
	o.memo[name] = found
	return found
}

// chain renders a selector chain rooted at an identifier ("t.deps.Groups.For"), else "".
func chain(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		if base := chain(x.X); base != "" {
			return base + "." + x.Sel.Name
		}
	}
	return ""
}
