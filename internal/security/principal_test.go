package security

import "testing"

func TestPrincipalMappingRules(t *testing.T) {
	cases := []struct{ rules, dn, want string }{
		{"DEFAULT", "CN=alice,OU=eng,O=acme", "CN=alice,OU=eng,O=acme"},
		{"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "CN=kafka-server1,OU=ServiceUsers,O=Org,C=US", "kafka-server1"},
		{"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "CN=duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "CN=duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US"},
		{"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L", "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Santa Clara,ST=CA,C=US", "duke@javasoft"},
		{"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/U", "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Santa Clara,ST=CA,C=US", "DUKE@JAVASOFT"},
		// A back reference past the last group stays literal, as in Kafka.
		{"RULE:^CN=(.*?),.*$/$1-$4/", "CN=a,OU=b", "a-$4"},
		// Escaped slashes, and spaces around rules.
		{`  RULE:^CN=(.*)$/svc\/$1/ , DEFAULT `, "CN=x", "svc/x"},
		{"RULE:^CN=([^,]*).*$/$1/L, RULE:.*/never/", "CN=Bob,O=x", "bob"},
	}
	for _, c := range cases {
		m, err := ParsePrincipalRules(c.rules)
		if err != nil {
			t.Fatalf("%q: %v", c.rules, err)
		}
		got, err := m.Map(c.dn)
		if err != nil || got != c.want {
			t.Errorf("rules %q on %q = %q, %v; want %q", c.rules, c.dn, got, err, c.want)
		}
	}
}

func TestPrincipalMappingNoRuleMatches(t *testing.T) {
	m, err := ParsePrincipalRules("RULE:^CN=(.*),OU=ops$/$1/")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := m.Map("CN=alice,OU=eng"); err == nil {
		t.Fatalf("no rule matches, yet mapped to %q", got)
	}
}

func TestPrincipalMappingInvalidRules(t *testing.T) {
	for _, rules := range []string{"", "DEFAULTS", "RULE:abc", "RULE:abc/def", "RULE:abc/def/X", "RULE:(/x/", "DEFAULT DEFAULT", "KERBEROS"} {
		if _, err := ParsePrincipalRules(rules); err == nil {
			t.Errorf("rules %q parsed", rules)
		}
	}
}
