Feature: Namespaced Episodic Memory

  Background:
    Given a memory service is running
    And user "alice" is authenticated

  Scenario: Write and read a memory
    When alice puts namespace ["user","alice","notes"], key "py_tip", value {"text":"Use list comprehensions"}
    Then getting namespace ["user","alice","notes"], key "py_tip" returns value {"text":"Use list comprehensions"}

  Scenario: TTL expiry
    When alice puts namespace ["user","alice","tmp"], key "ephemeral", value {"x":1} with ttl_seconds 1
    And 2 seconds pass
    Then getting namespace ["user","alice","tmp"], key "ephemeral" returns 404

  Scenario: Namespace prefix search
    When alice puts namespace ["user","alice","a"], key "k1", value {"text":"cats"}
    And alice puts namespace ["user","alice","b"], key "k2", value {"text":"dogs"}
    And alice puts namespace ["user","bob","c"],   key "k3", value {"text":"fish"}
    Then searching prefix ["user","alice"] returns keys ["k1","k2"] but not "k3"

  Scenario: Attribute filtering
    When alice puts namespace ["user","alice","mem"], key "m1", value {"text":"Python is great"} with extracted attributes {"lang":"python"}
    And alice puts namespace ["user","alice","mem"], key "m2", value {"text":"Go is fast"} with extracted attributes {"lang":"go"}
    Then searching prefix ["user","alice"] filter {"lang":"python"} returns only "m1"

  Scenario: OPA blocks cross-user access
    Given user "bob" is authenticated
    Then bob getting namespace ["user","alice","notes"], key "py_tip" returns 403

  Scenario: Namespace boundary matching
    When alice puts namespace ["user","aliced","notes"], key "trap", value {"text":"trap"}
    Then searching prefix ["user","alice"] does not return key "trap"

  Scenario: Semantic search
    When alice puts namespace ["user","alice","facts"], key "f1", value {"text":"Python uses indentation for blocks"}
    And the vector index has been synchronized
    Then searching prefix ["user","alice"] with query "whitespace-sensitive syntax" returns "f1" in top results

  Scenario: Delete removes from vector index
    When alice puts namespace ["user","alice","mem"], key "to_delete", value {"text":"delete me"}
    And alice deletes namespace ["user","alice","mem"], key "to_delete"
    Then getting namespace ["user","alice","mem"], key "to_delete" returns 404
    And the vector index has no entry for the deleted memory

  Scenario: List namespaces
    When alice puts namespace ["user","alice","mem"], key "k1", value {}
    And alice puts namespace ["user","alice","tasks"], key "k2", value {}
    Then listing namespaces with prefix ["user","alice"] returns [["user","alice","mem"],["user","alice","tasks"]]

  Scenario: Event timeline
    When alice puts namespace ["user","alice","log"], key "e1", value {"text":"first"}
    And alice puts namespace ["user","alice","log"], key "e1", value {"text":"second"}
    And alice deletes namespace ["user","alice","log"], key "e1"
    And alice puts namespace ["user","alice","log"], key "e2", value {"x":1} with ttl_seconds 1
    And 2 seconds pass
    Then the event timeline for prefix ["user","alice"] has kinds ["add","update","delete","add","expired"]
    And the timeline's add and update events carry their values, the others none
