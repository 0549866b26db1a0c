package modelgen

// builtinCorpus trains the tokenizer of generated models when no corpus is
// given: a little English, chat-formatted text, arithmetic, code and the
// puzzle vocabulary of troupe's environments, so that common words and
// symbols get their own tokens.
const builtinCorpus = `The quick brown fox jumps over the lazy dog. A team of agents solves the puzzle together:
the planner proposes a plan, the coder writes the program, and the tester runs it and reports.
You are a helpful assistant. Think step by step, then give the final answer.
Question: What is 12 + 7? Answer: 19. Question: What is 3 * 14? Answer: 42.
The answer is \boxed{42}. Let x = 5 and y = 7; then x + y = 12 and x * y = 35.
Sudoku: fill the grid so that every row, column and box holds the digits 1 to 9 exactly once.
Sokoban: push every box onto a target; moves are up, down, left and right.
Plan a path from the start S to the goal G around the walls #; the path is a list of moves.
def solve(nums):
    total = 0
    for n in nums:
        if n % 2 == 0:
            total += n
    return total

print(solve([1, 2, 3, 4, 5, 6]))
import sys
for line in sys.stdin:
    a, b = map(int, line.split())
    print(a + b)
func main() {
	fmt.Println("hello, world")
}
<think>
The user asks for the sum. I add the numbers one by one and check the result.
</think>
The sum is 10. I hope this helps! Is there anything else you would like to know?
In reinforcement learning, the policy samples several completions for the same prompt, the
environment scores them, and the advantage of each is its reward minus the group's mean reward.
`
